import torch.distributed as dist


def solution(tensor):
    w = dist.get_world_size()
    out = tensor.new_empty((w,) + tensor.shape)
    dist.all_gather_into_tensor(out.view(-1), tensor.contiguous().view(-1))
    tensor.zero_()  # scribbles on its input, which the all-gather contract forbids
    return out
