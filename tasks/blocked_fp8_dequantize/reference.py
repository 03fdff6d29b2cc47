import torch
import torch.distributed as dist

BLOCK = 128


def make_inputs(ctx):
    m, n, w = ctx.dims["M"], ctx.dims["N"], ctx.world_size
    # Values spread over most of the e4m3 range, as a blocked quantizer produces them.
    y = ctx.randn(w, m, n, dtype=torch.float32, scale=100.0).clamp_(-448.0, 448.0).to(torch.float8_e4m3fn)
    s = ctx.rand(w, m * n // BLOCK, dtype=torch.float32, low=1e-3, high=2e-2)
    return y, s, BLOCK


@torch.no_grad()
def solution(local_y: torch.Tensor, local_s: torch.Tensor, block_size: int = 128) -> torch.Tensor:
    x = (local_y.float().reshape(-1, block_size) * local_s.reshape(-1, 1)).view(local_y.shape)
    out = torch.empty_like(x)
    dist.all_to_all_single(out, x)
    return out
