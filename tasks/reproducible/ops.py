"""Reproducible building blocks beyond the GEMM, for a transformer decode step.

Every operation here is either one IEEE-754 fp32 operation per element (add, subtract, multiply,
divide, comparisons, integer bit operations: correctly rounded, hence identical on any CPU or
GPU), a square root taken in fp64 and rounded to fp32, or a reduction through
`reproducible_matmul`, whose order is fixed. Each elementwise step is
its own eager PyTorch operation, so no compiler can fuse a multiply and an add into an FMA.
Library transcendental functions (exp, rsqrt) differ between CPU and GPU implementations, so exp
is built here from multiplies and adds. Division by a tensor, never by a Python number (PyTorch's
CUDA kernel turns division by a scalar into multiplication by its reciprocal).
"""

from __future__ import annotations

import torch

from tasks.reproducible.gemm import reproducible_matmul

LOG2E = 1.4426950408889634
# ln 2 split in two: LN2_HI has 16 significant bits, so n * LN2_HI is exact for |n| < 256.
LN2_HI = 0.693145751953125
LN2_LO = 1.428606765330187e-06
# Taylor coefficients of exp on |r| <= ln(2)/2, highest degree first (relative error ~2e-7).
EXP_COEFFS = (1 / 5040, 1 / 720, 1 / 120, 1 / 24, 1 / 6, 1 / 2, 1.0, 1.0)


def exp(z: torch.Tensor) -> torch.Tensor:
    """exp(z) in fp32 from IEEE operations only (range reduction, then a polynomial)."""
    z = z.float().clamp(-87.0, 88.0)
    n = torch.round(z * LOG2E)
    r = z - n * LN2_HI
    r = r - n * LN2_LO
    p = torch.full_like(r, EXP_COEFFS[0])
    for c in EXP_COEFFS[1:]:
        p = p * r
        p = p + c
    # 2**n built from its bits: n is in [-126, 127] after the clamp.
    two_n = torch.bitwise_left_shift(n.to(torch.int32) + 127, 23).view(torch.float32)
    return p * two_n


def silu(z: torch.Tensor) -> torch.Tensor:
    d = exp(-z)
    d = d + 1.0
    return z / d


def row_sum(x: torch.Tensor) -> torch.Tensor:
    """Sum over the last dimension as a reproducible FMA chain (x * 1 + acc), keepdim."""
    ones = torch.ones(1, x.shape[-1], dtype=torch.bfloat16, device=x.device)
    return reproducible_matmul(x.float(), ones)


def rms_norm(h: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    sq = h * h
    mean = row_sum(sq) / torch.full((1,), float(h.shape[-1]), device=h.device)
    # fp32 sqrt is not correctly rounded on every CPU build of PyTorch (some vectorized kernels are
    # off by an ulp for a fifth of inputs); the fp64 root rounded to fp32 is, wherever it runs.
    rms = torch.sqrt((mean + eps).double()).float()
    return (h / rms) * weight.float()


def softmax(scores: torch.Tensor) -> torch.Tensor:
    """Softmax over the last dimension."""
    z = scores - scores.amax(dim=-1, keepdim=True)
    e = exp(z)
    return e / row_sum(e)


def rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotary embedding, rotate-half convention: x [..., D], cos/sin broadcastable to [..., D/2]."""
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    a = x1 * cos
    b = x2 * sin
    c = x2 * cos
    d = x1 * sin
    return torch.cat([a - b, c + d], dim=-1)
