import torch.distributed as dist


def solution(tensor):
    dist.all_reduce(tensor)
    tensor[0, 0] = float("nan")
    return tensor
