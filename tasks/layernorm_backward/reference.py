import math

import torch
import torch.distributed as dist


def make_inputs(ctx):
    rows, h = ctx.dims["B"], ctx.dims["H"]
    x = ctx.randn(rows, h, dtype=torch.float32)
    x_hat = (x - x.mean(dim=-1, keepdim=True)) * torch.rsqrt(x.var(dim=-1, unbiased=False, keepdim=True) + 1e-5)
    # Gradient of a loss averaged over all B*W rows: scaled so each summed output is O(1).
    dy = ctx.randn(rows, h, scale=1.0 / math.sqrt(rows * ctx.world_size))
    return x_hat.to(ctx.dtype), dy


@torch.no_grad()
def solution(X_hat: torch.Tensor, dY: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    d_beta = dY.sum(dim=0)
    d_gamma = (dY * X_hat).sum(dim=0)
    dist.all_reduce(d_beta, op=dist.ReduceOp.SUM)
    dist.all_reduce(d_gamma, op=dist.ReduceOp.SUM)
    return d_gamma, d_beta
