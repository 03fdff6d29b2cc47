import math

import torch
import torch.distributed as dist


def make_inputs(ctx):
    b, s, h, d = ctx.dims["B"], ctx.dims["S"], ctx.dims["H"], ctx.dims["D"]
    q = ctx.randn(b, s, h, d)
    k = ctx.randn(b, s, h, d)
    # cos and sin of one random angle per entry, as a rotary table holds (|cos|, |sin| <= 1).
    angle = ctx.rand(b, s, d, dtype=torch.float32, high=2 * math.pi)
    return q, k, torch.cos(angle).to(ctx.dtype), torch.sin(angle).to(ctx.dtype)


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


@torch.no_grad()
def solution(
    q_local: torch.Tensor, k_local: torch.Tensor, cos_local: torch.Tensor, sin_local: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    cos = cos_local.unsqueeze(2)
    sin = sin_local.unsqueeze(2)
    q_rot = q_local * cos + rotate_half(q_local) * sin
    k_rot = k_local * cos + rotate_half(k_local) * sin

    world_size = dist.get_world_size()
    q_parts = [torch.empty_like(q_rot) for _ in range(world_size)]
    k_parts = [torch.empty_like(k_rot) for _ in range(world_size)]
    dist.all_gather(q_parts, q_rot.contiguous())
    dist.all_gather(k_parts, k_rot.contiguous())
    return torch.cat(q_parts, dim=1), torch.cat(k_parts, dim=1)
