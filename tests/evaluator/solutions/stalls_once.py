import time

import torch
import torch.distributed as dist

_calls = [0]


@torch.no_grad()
def solution(tensor):
    # A right answer whose 8th call stalls for 0.2 s, as when the host deschedules the process:
    # with 3 trials and 2 warm-up calls, that is the third call of the first timing attempt.
    _calls[0] += 1
    if _calls[0] == 8:
        time.sleep(0.2)
    dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
    return tensor
