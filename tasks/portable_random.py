"""Normal draws that are the same bits on every CPU, for inputs whose output digests are compared
across hardware: a bitwise problem's public trial, in every mode.

`torch.randn` on the CPU is not: its vectorized path gives other values without SIMD than with
AVX2 or AVX-512 (and an ARM host has its own), and PyTorch's own `log` and `sqrt` are not
correctly rounded on every build either. Here the uniform draws come from `torch.rand` (serial and
exact on every build), and everything after them is IEEE-754 fp32 adds, multiplies and divides,
each its own tensor operation: Marsaglia's polar method, with the logarithm and the square root
built from those operations (accurate to a few fp32 ulps: these are random inputs, and what
matters is that every machine computes the same bits).
"""

from __future__ import annotations

import math

import torch

LN2 = math.log(2.0)
SQRT_HALF = math.sqrt(0.5)
ACCEPTED = math.pi / 4  # the share of pairs inside the unit circle
LOG_TERMS = 6  # atanh series terms: |f| <= 0.172, so f**13 / 13 < 1e-11
SQRT_STEPS = 3  # Newton steps from a start within 5%: 5e-2 -> 1.2e-3 -> 7e-7 -> 3e-13


def _pow2(e: torch.Tensor) -> torch.Tensor:
    """2**e as fp32 for integer e in the normal range, from its bits (exact)."""
    return ((e.to(torch.int32) + 127) << 23).view(torch.float32)


def log(s: torch.Tensor) -> torch.Tensor:
    """ln(s) for positive fp32 s: s = m * 2**e with m in [sqrt(1/2), sqrt(2)), then
    ln(m) = 2 atanh((m - 1) / (m + 1)) as a series."""
    m, e = torch.frexp(s)
    low = m < SQRT_HALF
    m = torch.where(low, m * 2.0, m)
    e = torch.where(low, e - 1, e).to(torch.float32)
    f = (m - 1.0) / (m + 1.0)
    f2 = f * f
    p = torch.full_like(f, 1.0 / (2 * LOG_TERMS - 1))
    for k in range(LOG_TERMS - 2, -1, -1):
        p = p * f2
        p = p + 1.0 / (2 * k + 1)
    return (f * 2.0) * p + e * LN2


def sqrt(a: torch.Tensor) -> torch.Tensor:
    """sqrt(a) for positive fp32 a: a = m * 4**k with m in [1/4, 1), then Newton's method on m
    from a linear start."""
    m, e = torch.frexp(a)
    odd = (e % 2) != 0
    m = torch.where(odd, m * 0.5, m)  # m * 2**e with e even
    e = torch.where(odd, e + 1, e)
    x = m * 0.6666667
    x = x + 0.3541667  # within 5% of sqrt(m) on [1/4, 1)
    for _ in range(SQRT_STEPS):
        x = x + m / x
        x = x * 0.5
    return x * _pow2(torch.div(e, 2, rounding_mode="floor"))


def normal(size: tuple[int, ...], generator: torch.Generator) -> torch.Tensor:
    """fp32 standard normal values of shape `size` from a CPU generator, the same bits on every
    CPU and PyTorch build for the same generator state."""
    n = math.prod(size)
    parts, have = [torch.empty(0)], 0
    while have < n:
        pairs = math.ceil((n - have) / 2 / ACCEPTED * 1.05) + 16
        v = torch.rand(2, pairs, generator=generator, dtype=torch.float32)
        v = v * 2.0
        v = v - 1.0
        s = v[0] * v[0]
        s = s + v[1] * v[1]
        inside = (s < 1.0) & (s > 0.0)
        v, s = v[:, inside], s[inside]
        t = log(s) * -2.0
        t = sqrt(t / s)
        parts.append(torch.stack([v[0] * t, v[1] * t], dim=1).reshape(-1))
        have += parts[-1].numel()
    return torch.cat(parts)[:n].reshape(size)
