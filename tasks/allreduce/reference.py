import torch
import torch.distributed as dist


def make_inputs(ctx):
    return (ctx.randn(ctx.dims["M"], ctx.dims["N"]),)


@torch.no_grad()
def solution(tensor: torch.Tensor) -> torch.Tensor:
    dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
    return tensor
