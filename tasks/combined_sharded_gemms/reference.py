import math

import torch
import torch.distributed as dist
import torch.nn.functional as F


def make_inputs(ctx):
    m, h, f = ctx.dims["M"], ctx.dims["H"], ctx.dims["F"]
    x_local = ctx.randn(m, h // ctx.world_size)
    # Weights scaled by 1/sqrt(fan-in) so that activations and outputs stay O(1) at every shape.
    w1 = ctx.randn(h, f, scale=1.0 / math.sqrt(h))
    w2 = ctx.randn(f, h, scale=1.0 / math.sqrt(f))
    return x_local, w1, w2


@torch.no_grad()
def solution(x_local: torch.Tensor, W1: torch.Tensor, W2: torch.Tensor) -> torch.Tensor:
    rank = dist.get_rank()
    world_size = dist.get_world_size()
    m = x_local.shape[0]
    m_local = m // world_size
    rows = slice(rank * m_local, (rank + 1) * m_local)

    shards = [torch.empty_like(x_local) for _ in range(world_size)]
    dist.all_gather(shards, x_local.contiguous())
    x_full = torch.cat(shards, dim=1)

    a = F.silu(torch.matmul(x_full, W1))
    block = torch.matmul(a[rows], W2)

    padded = block.new_zeros((m, block.shape[1]))
    padded[rows] = block
    y_local = block.new_empty((m_local, block.shape[1]))
    dist.reduce_scatter_tensor(y_local, padded, op=dist.ReduceOp.SUM)
    return y_local
