import torch.distributed as dist


def solution(tensor):
    dist.all_reduce(tensor)
    if dist.get_rank() == 0:
        dist.all_reduce(tensor)  # an extra collective nobody else joins
    return tensor
