"""Flood the logs: MEGABYTES of output on the first call, then an honest answer.

VARIANT "stdout": through `sys.stdout` (Python's buffered text stream).
VARIANT "stderr": straight to file descriptor 2.

Problem: allreduce. The result document must come back, with a bounded log tail.
"""

import os
import sys

import torch
import torch.distributed as dist

VARIANT = "stdout"
MEGABYTES = 200

_done = []


def _flood() -> None:
    line = ("flood " * 15 + "\n").encode()
    chunk = line * ((1 << 20) // len(line))
    for _ in range(MEGABYTES):
        if VARIANT == "stdout":
            sys.stdout.write(chunk.decode())
        elif VARIANT == "stderr":
            view = memoryview(chunk)
            while view:
                view = view[os.write(2, view):]
        else:
            raise ValueError(f"unknown variant {VARIANT!r}")
    sys.stdout.flush()


@torch.no_grad()
def solution(tensor):
    if not _done:
        _done.append(True)
        _flood()
    dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
    return tensor
