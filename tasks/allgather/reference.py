import torch
import torch.distributed as dist


def make_inputs(ctx):
    return (ctx.randn(ctx.dims["M"], ctx.dims["N"]),)


@torch.no_grad()
def solution(tensor: torch.Tensor) -> torch.Tensor:
    world_size = dist.get_world_size()
    out = tensor.new_empty((world_size,) + tensor.shape)
    # Gather into the flat view: gloo rejects a stacked output, NCCL accepts both.
    dist.all_gather_into_tensor(out.view(-1), tensor.contiguous().view(-1))
    return out
