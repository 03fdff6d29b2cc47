import torch
import torch.distributed as dist


def make_inputs(ctx):
    r, h = ctx.dims["R"], ctx.dims["H"]
    rs_input = ctx.randn(ctx.world_size * r * h)
    gamma = ctx.randn(h, shared=True)
    return rs_input, gamma, 1e-5


@torch.no_grad()
def solution(rs_input_1d: torch.Tensor, gamma: torch.Tensor, eps: float) -> torch.Tensor:
    world_size = dist.get_world_size()
    chunk = rs_input_1d.numel() // world_size
    hidden = gamma.numel()
    reduced = rs_input_1d.new_empty(chunk)
    dist.reduce_scatter_tensor(reduced, rs_input_1d.contiguous(), op=dist.ReduceOp.SUM)
    reduced.div_(world_size)

    x = reduced.view(chunk // hidden, hidden).float()
    rms = torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True).add(eps))
    return (x * rms * gamma.float()).to(rs_input_1d.dtype)
