import torch.distributed as dist


def solution(tensor):
    w = dist.get_world_size()
    out = tensor.new_empty((w,) + tensor.shape)
    dist.all_gather_into_tensor(out.view(-1), tensor.contiguous().view(-1))
    # The last rank puts every shard one slot too far.
    return out.roll(1, dims=0) if dist.get_rank() == w - 1 else out
