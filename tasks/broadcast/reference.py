import torch
import torch.distributed as dist


def make_inputs(ctx):
    src = int(ctx.randint(0, ctx.world_size, 1, shared=True))
    return ctx.randn(ctx.dims["M"], ctx.dims["N"]), src


@torch.no_grad()
def solution(tensor: torch.Tensor, src: int = 0) -> torch.Tensor:
    out = tensor.clone()
    dist.broadcast(out, src=src)
    return out
