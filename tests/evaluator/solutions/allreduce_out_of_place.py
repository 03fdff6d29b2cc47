import torch
import torch.distributed as dist


@torch.no_grad()
def solution(tensor):
    # Written like the public suite's reference: the sum goes into a new tensor.
    out = tensor.clone()
    dist.all_reduce(out)
    return out
