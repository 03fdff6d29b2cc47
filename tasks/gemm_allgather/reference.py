import math

import torch
import torch.distributed as dist


def make_inputs(ctx):
    m, n, k = ctx.dims["M"], ctx.dims["N"], ctx.dims["K"]
    a = ctx.randn(m, k)
    b_local = ctx.randn(k, n // ctx.world_size, scale=1.0 / math.sqrt(k))
    return a, b_local


@torch.no_grad()
def solution(A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
    world_size = dist.get_world_size()
    c_local = torch.matmul(A, B)
    parts = [torch.empty_like(c_local) for _ in range(world_size)]
    dist.all_gather(parts, c_local)
    return torch.cat(parts, dim=1)
