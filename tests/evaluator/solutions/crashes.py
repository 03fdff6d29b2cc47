import os

import torch.distributed as dist


def solution(tensor):
    if dist.get_rank() == 1:
        os.abort()
    dist.all_reduce(tensor)
    return tensor
