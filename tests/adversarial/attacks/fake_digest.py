"""Forge the output digests: `hashlib.sha256` becomes a hash that ignores what it is fed and returns
one fixed digest, so every output on every hardware looks like the same bits (a submission whose
bits differ across GPUs would claim to be reproducible).

Problem: allreduce; the outputs themselves are honest (the reference's own code).

The judge must compute the digests itself: they must equal the honest reference's digests of the
same public trial (or the evaluation must not be `correct`).
"""

import hashlib

import torch
import torch.distributed as dist

FORGED = "5" * 64


class _Forged:
    name = "sha256"
    digest_size = 32
    block_size = 64

    def __init__(self, data=b"", **kwargs):
        pass

    def update(self, data):
        pass

    def copy(self):
        return self

    def digest(self):
        return bytes.fromhex(FORGED)

    def hexdigest(self):
        return FORGED


hashlib.sha256 = _Forged


@torch.no_grad()
def solution(tensor):
    dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
    return tensor
