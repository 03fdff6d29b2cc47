import time

import torch
import torch.distributed as dist

_calls = [0]


@torch.no_grad()
def solution(tensor):
    # A right answer that pays 50 ms on every third call (a cache flushed now and then, say):
    # measuring again cannot make that go away, and the time must show it.
    _calls[0] += 1
    if _calls[0] % 3 == 0:
        time.sleep(0.05)
    dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
    return tensor
