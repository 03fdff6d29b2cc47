import torch.distributed as dist


def solution(tensor):
    own = tensor.clone()
    dist.all_reduce(tensor)
    # The last rank leaves one rank's contribution out of its result.
    if dist.get_rank() == dist.get_world_size() - 1:
        tensor -= own
    return tensor
