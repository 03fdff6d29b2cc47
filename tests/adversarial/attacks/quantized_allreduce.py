"""A lossy all-reduce: send each rank's values in a lower precision than the problem's bf16 and sum
the dequantized values (a quarter or half of the bytes on the wire).

Problem: allreduce (in place).

VARIANT "int8": one shared scale (the all-reduced max |x| / 127); int8 codes all-gathered, summed
in fp32.
VARIANT "fp8_e4m3": values cast to float8_e4m3fn (3 mantissa bits) and all-gathered.
VARIANT "fp8_e5m2": values cast to float8_e5m2 (2 mantissa bits) and all-gathered.

The judge must report it not `correct`: its tolerance must not admit errors that no honest
summation order makes.
"""

import torch
import torch.distributed as dist

VARIANT = "int8"


def _gather(codes):
    out = codes.new_empty((dist.get_world_size(),) + tuple(codes.shape))
    dist.all_gather_into_tensor(out.view(-1), codes.contiguous().view(-1))
    return out


@torch.no_grad()
def solution(tensor):
    x = tensor.float()
    if VARIANT == "int8":
        amax = x.abs().max().reshape(1).clamp_min(1e-12)
        dist.all_reduce(amax, op=dist.ReduceOp.MAX)
        scale = amax / 127
        codes = (x / scale).round().clamp(-127, 127).to(torch.int8)
        total = _gather(codes).float().sum(0) * scale
    elif VARIANT in ("fp8_e4m3", "fp8_e5m2"):
        dtype = torch.float8_e4m3fn if VARIANT == "fp8_e4m3" else torch.float8_e5m2
        codes = x.to(dtype).view(torch.uint8)  # gloo has no fp8: send the bytes
        total = _gather(codes).view(dtype).float().sum(0)
    else:
        raise ValueError(f"unknown variant {VARIANT!r}")
    tensor.copy_(total)
    return tensor
