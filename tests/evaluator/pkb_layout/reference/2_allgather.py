import torch.distributed as dist


def solution(tensor):
    out = tensor.new_empty((dist.get_world_size(),) + tensor.shape)
    dist.all_gather_into_tensor(out.view(-1), tensor.contiguous().view(-1))
    return out
