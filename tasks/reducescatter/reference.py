import torch
import torch.distributed as dist


def make_inputs(ctx):
    return (ctx.randn(ctx.world_size * ctx.dims["M"], ctx.dims["N"]),)


@torch.no_grad()
def solution(tensor: torch.Tensor) -> torch.Tensor:
    world_size = dist.get_world_size()
    out = tensor.new_empty((tensor.shape[0] // world_size,) + tuple(tensor.shape[1:]))
    dist.reduce_scatter_tensor(out, tensor.contiguous(), op=dist.ReduceOp.SUM)
    return out
