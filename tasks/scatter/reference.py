import torch
import torch.distributed as dist


def make_inputs(ctx):
    m, n = ctx.dims["M"], ctx.dims["N"]
    src = int(ctx.randint(0, ctx.world_size, 1, shared=True))
    if ctx.rank == src:
        return ctx.randn(ctx.world_size, m, n), src
    return ctx.randn(m, n), src


@torch.no_grad()
def solution(tensor: torch.Tensor, src: int = 0) -> torch.Tensor:
    if dist.get_rank() == src:
        slices = [s.contiguous() for s in tensor.unbind(0)]
        out = torch.empty_like(slices[0])
        dist.scatter(out, scatter_list=slices, src=src)
    else:
        out = torch.empty_like(tensor)
        dist.scatter(out, scatter_list=None, src=src)
    return out
