import torch
import torch.distributed as dist


def solution(rows, counts):
    gathered = [rows.new_empty((count, rows.shape[1])) for count in counts]
    dist.all_gather(gathered, rows.contiguous())
    return torch.cat(gathered)
