import torch

from tasks.reproducible.gemm import reproducible_matmul


def make_inputs(ctx):
    m, n, k = ctx.dims["M"], ctx.dims["N"], ctx.dims["K"]
    n_local = n // ctx.world_size
    x = ctx.randn(m, k, shared=True)
    weight = ctx.randn(n_local, k, scale=k**-0.5)
    bias = ctx.randn(n_local, scale=0.1)
    return (x, weight, bias)


@torch.no_grad()
def solution(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    return reproducible_matmul(x, weight, bias)
