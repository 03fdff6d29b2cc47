"""Run past the deadline on some calls only.

VARIANT "sleep": every rank sleeps for an hour on call AT (after passing the first checks).
VARIANT "collective": on call AT, the last rank enters an all-reduce that no other rank joins.

Problem: allreduce, with a short time limit in the request. The judge must answer with a
`timeout` (or `runtime_error`) document within a bounded time of its limit, and leave nothing
running.
"""

import time

import torch
import torch.distributed as dist

VARIANT = "sleep"
AT = 3

_calls = [0]


@torch.no_grad()
def solution(tensor):
    _calls[0] += 1
    if _calls[0] == AT:
        if VARIANT == "sleep":
            time.sleep(3600)
        elif VARIANT == "collective":
            if dist.get_rank() == dist.get_world_size() - 1:
                dist.all_reduce(tensor.clone())
        else:
            raise ValueError(f"unknown variant {VARIANT!r}")
    dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
    return tensor
