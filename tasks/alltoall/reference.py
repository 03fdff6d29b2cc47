import torch
import torch.distributed as dist


def make_inputs(ctx):
    return (ctx.randn(ctx.world_size, ctx.dims["M"], ctx.dims["N"]),)


@torch.no_grad()
def solution(tensor: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(tensor)
    dist.all_to_all_single(out, tensor.contiguous())
    return out
