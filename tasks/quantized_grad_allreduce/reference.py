import torch
import torch.distributed as dist
import torch.nn.functional as F


def make_inputs(ctx):
    d = ctx.dims
    return (ctx.randn(d["M"] * d["N"]), d["block"])


def _int8_round_trip(x: torch.Tensor, block_size: int) -> torch.Tensor:
    """Blockwise int8 quantize + dequantize, in fp32."""
    n = x.numel()
    flat = F.pad(x.reshape(-1), (0, -n % block_size)).view(-1, block_size)
    scales = flat.abs().amax(dim=1).float().clamp(min=1e-8) / 127.0
    codes = (flat.float() / scales.unsqueeze(1)).round().clamp(-127, 127).to(torch.int8)
    return (codes.float() * scales.unsqueeze(1)).reshape(-1)[:n]


@torch.no_grad()
def solution(flat_grad: torch.Tensor, block_size: int) -> torch.Tensor:
    world_size = dist.get_world_size()
    acc = _int8_round_trip(flat_grad, block_size)
    dist.all_reduce(acc, op=dist.ReduceOp.SUM)
    acc.div_(world_size)
    return acc.to(flat_grad.dtype).reshape(flat_grad.shape)
