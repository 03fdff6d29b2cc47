import torch
import torch.distributed as dist


def make_inputs(ctx):
    return (ctx.randn(ctx.dims["M"], ctx.dims["N"]), None)


@torch.no_grad()
def solution(x: torch.Tensor, group=None) -> torch.Tensor:
    group = group or dist.group.WORLD
    world_size = dist.get_world_size(group)
    if world_size == 1:
        return x.contiguous()
    out = x.new_empty((world_size * x.size(0),) + tuple(x.shape[1:]))
    # Gather into the flat view: gloo rejects a multi-dimensional output, NCCL accepts both.
    dist.all_gather_into_tensor(out.view(-1), x.contiguous().view(-1), group=group)
    return out
