import torch
import torch.distributed as dist


def solution(tensor):
    w = dist.get_world_size()
    return torch.zeros((w,) + tensor.shape, dtype=tensor.dtype, device=tensor.device)
