"""Exact CPU emulation of the reproducible GEMM (order in `config.py`).

fp32 FMA emulation (Boldo and Melquiond 2008, "Emulation of FMA and correctly rounded sums"):
the product of two fp32 values is exact in float64 (24 + 24 <= 53 bits); the float64 sum s of the
product and the accumulator is corrected to round-to-odd with the exact TwoSum error e, and
rounding that round-to-odd value to fp32 equals rounding the exact sum once, because float64 keeps
more than 24 + 2 bits. `math.fma` would round twice (to double, then to float). Vectorized over a
whole output tile per k step, so a realistic layer takes seconds, not hours. Where a C compiler is
present the chains run compiled instead (cpu_native.py: the C library's single-rounding `fmaf`),
with the same bits, tens of times faster.
"""

from __future__ import annotations

import torch

from tasks.reproducible import cpu_native
from tasks.reproducible.config import CHUNK, split_count

CANONICAL_NAN_BITS = 0x7FC00000


def canonical_nan_f32(like: torch.Tensor) -> torch.Tensor:
    return torch.tensor(CANONICAL_NAN_BITS, dtype=torch.int32).view(torch.float32).to(like.device)


def canonicalize_nan(y: torch.Tensor) -> torch.Tensor:
    """Every NaN becomes 0x7FC00000 (GPUs and CPUs produce different NaN payloads)."""
    return torch.where(torch.isnan(y), canonical_nan_f32(y), y)


def fma_f32(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    """fp32 fused multiply-add with one rounding, elementwise (broadcasting), for fp32 inputs."""
    a64, b64, c64 = a.double(), b.double(), c.double()
    return _fma_from_f64(a64 * b64, c64)


def _fma_from_f64(p: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    """round_f32(p + c) for an exact float64 product p and an fp32-valued float64 c."""
    s = p + c
    # TwoSum: e = (p + c) - s exactly (NaN when s is not finite, which the tests below ignore).
    bv = s - p
    e = (p - (s - bv)) + (c - bv)
    # Round to odd: truncate toward zero (one ulp down in magnitude where s overshot, i.e. where
    # e and s have opposite signs), then set the last bit if inexact. On sign-magnitude bits
    # viewed as int64, "one ulp down in magnitude" is minus one for either sign. s is never
    # zero when e is not: p + c rounding to zero means p + c was exactly zero.
    # (e * s cannot underflow or overflow: fp32 inputs keep |s| and |e| within 2^-360..2^260.)
    overshoot = (e * s) < 0
    inexact = e.abs() > 0
    rounded_to_odd = (s.view(torch.int64) - overshoot.long()) | inexact.long()
    return rounded_to_odd.view(torch.float64).to(torch.float32)


def chain_partials(x32: torch.Tensor, w32: torch.Tensor) -> torch.Tensor:
    """[B, S, M, N]: per batch entry and chunk s, the fp32 FMA chain over the chunk's k range for
    every (m, n). x32 [B, M, K], w32 [B, N, K]. Compiled where possible, else emulated."""
    native = cpu_native.chain_partials(x32, w32)
    return native if native is not None else chain_partials_emulated(x32, w32)


def chain_partials_emulated(x32: torch.Tensor, w32: torch.Tensor) -> torch.Tensor:
    """chain_partials in float64 tensor arithmetic (no compiler needed).

    Chunks are independent chains, so all of them advance together, one k step per iteration;
    the shorter last chunk is padded with x = -0.0, w = +0.0, whose product (-0.0) leaves any
    accumulator unchanged (see config.py), exactly as the GPU kernels pad.
    """
    bsz, m, k = x32.shape
    n = w32.shape[1]
    s = split_count(k)
    length = min(CHUNK, k)
    padded = s * length
    x64 = torch.full((bsz, m, padded), -0.0, dtype=torch.float64)
    x64[..., :k] = x32
    w64 = torch.zeros((bsz, n, padded), dtype=torch.float64)
    w64[..., :k] = w32
    xs = x64.reshape(bsz, m, s, length).permute(0, 2, 1, 3).contiguous()  # [B, S, M, L]
    ws = w64.reshape(bsz, n, s, length).permute(0, 2, 3, 1).contiguous()  # [B, S, L, N]
    acc = torch.zeros(bsz, s, m, n, dtype=torch.float32)
    for kk in range(length):
        acc = _fma_from_f64(xs[..., kk : kk + 1] * ws[..., kk : kk + 1, :], acc.double())
    return acc


def reproducible_bmm_cpu(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """fp32 [B, M, N] = x [B, M, K] @ weight[B, N, K].T (+ bias [N]) in the reproducible order."""
    if x.dim() != 3 or weight.dim() != 3 or x.shape[0] != weight.shape[0] or x.shape[2] != weight.shape[2]:
        raise ValueError(f"need x [B, M, K] and weight [B, N, K], got {tuple(x.shape)} and {tuple(weight.shape)}")
    x32, w32 = _exact_f32(x.cpu(), "x"), _exact_f32(weight.cpu(), "weight")
    if x.shape[2] == 0:  # no chunks: the empty sum, +0.0
        y = torch.zeros(x.shape[0], x.shape[1], weight.shape[1])
    else:
        partials = chain_partials(x32, w32)
        y = partials[:, 0]
        for s in range(1, partials.shape[1]):
            y = y + partials[:, s]
    if bias is not None:
        y = y + _exact_f32(bias.cpu(), "bias").reshape(1, 1, -1)
    return canonicalize_nan(y)


def reproducible_matmul_cpu(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """fp32 [..., N] = x @ weight.T (+ bias) in the reproducible order, on the CPU."""
    lead = x.shape[:-1]
    k = x.shape[-1]
    if weight.dim() != 2 or weight.shape[1] != k:
        raise ValueError(f"weight must be [N, {k}], got {tuple(weight.shape)}")
    y = reproducible_bmm_cpu(x.reshape(1, lead.numel(), k), weight[None], bias)
    return y.reshape(*lead, weight.shape[0])


def _exact_f32(t: torch.Tensor, name: str) -> torch.Tensor:
    if t.dtype not in (torch.float32, torch.bfloat16, torch.float16):
        raise TypeError(f"{name} must be float32, bfloat16 or float16 (exact in fp32), got {t.dtype}")
    return t.float()
