import torch.distributed as dist


def solution(tensor):
    dist.all_reduce(tensor)
    return tensor.float()
