"""Triton kernels of the reproducible path (order in config.py). Triton is imported lazily, so
this module imports on machines without it.

`repro_tile_kernel` computes a BLOCK_M x BLOCK_N output tile. Per chunk it runs
`tl.dot(a, b, acc, input_precision="ieee")`, which lowers to one fp32 FMA chain per output over k
in order (no tensor cores, no TF32), starting from a zero accumulator; chunk results are then
added in index order. With split_parallel each program does one chunk and writes its partial;
`repro_combine_kernel` adds the partials in index order. Compiled with enable_fp_fusion=True:
the dot's multiply-adds must become fma.rn.f32 (with fusion off LLVM splits them into a multiply
and an add); no other multiply feeds an add in these kernels, so nothing else can be contracted.
"""

from __future__ import annotations

from functools import lru_cache

import torch

from tasks.reproducible.config import CHUNK, LaunchConfig, split_count

# Inside the kernels, -2147483648 is 0x80000000 (the bits of -0.0) and 0x7FC00000 the canonical NaN.
COMBINE_BLOCK = 1024


@lru_cache(maxsize=1)
def kernels():
    import triton
    import triton.language as tl

    # Sizes and most strides are not specialized on (fewer compilations); the inner strides are,
    # so unit strides are known at compile time.
    @triton.jit(do_not_specialize=["M", "N", "K", "num_chunks", "stride_xm", "stride_os", "stride_om"])
    def repro_tile_kernel(
        x_ptr, w_ptr, b_ptr, out_ptr, M, N, K, num_chunks,
        stride_xm, stride_xk, stride_wn, stride_wk, stride_os, stride_om,
        HAS_BIAS: tl.constexpr, SPLIT_PARALLEL: tl.constexpr, CHUNK_LEN: tl.constexpr,
        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    ):  # fmt: skip
        pid_m = tl.program_id(0)
        pid_n = tl.program_id(1)
        offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        offs_k = tl.arange(0, BLOCK_K)
        mask_m = offs_m < M
        mask_n = offs_n < N
        if SPLIT_PARALLEL:
            s_lo = tl.program_id(2)
            s_count = 1
        else:
            s_lo = 0
            s_count = num_chunks
        # Padded k positions get x = -0.0 (and w = +0.0): their product -0.0 is neutral.
        neg_zero_a = tl.full([BLOCK_M, BLOCK_K], -2147483648, tl.int32).to(tl.float32, bitcast=True)
        # -0.0 is the identity of fp32 addition, so total = -0.0 + p_0 + p_1 ... is p_0 + p_1 ...
        total = tl.full([BLOCK_M, BLOCK_N], -2147483648, tl.int32).to(tl.float32, bitcast=True)
        for i in range(0, s_count):
            k_lo = (s_lo + i) * CHUNK_LEN
            k_hi = tl.minimum(k_lo + CHUNK_LEN, K)
            acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
            for k_off in range(0, k_hi - k_lo, BLOCK_K):
                kk = k_lo + k_off + offs_k
                in_k = kk < k_hi
                a = tl.load(
                    x_ptr + offs_m[:, None] * stride_xm + kk[None, :] * stride_xk,
                    mask=mask_m[:, None] & in_k[None, :],
                    other=0.0,
                ).to(tl.float32)
                a = tl.where(in_k[None, :], a, neg_zero_a)
                b = tl.load(
                    w_ptr + offs_n[None, :] * stride_wn + kk[:, None] * stride_wk,
                    mask=mask_n[None, :] & in_k[:, None],
                    other=0.0,
                ).to(tl.float32)
                acc = tl.dot(a, b, acc, input_precision="ieee")
            total = total + acc
        mask = mask_m[:, None] & mask_n[None, :]
        if SPLIT_PARALLEL:
            ptrs = out_ptr + s_lo * stride_os + offs_m[:, None] * stride_om + offs_n[None, :]
            tl.store(ptrs, total, mask=mask)
        else:
            y = total
            if HAS_BIAS:
                y = y + tl.load(b_ptr + offs_n, mask=mask_n, other=0.0)[None, :]
            nan = tl.full([BLOCK_M, BLOCK_N], 0x7FC00000, tl.int32).to(tl.float32, bitcast=True)
            y = tl.where(y != y, nan, y)
            tl.store(out_ptr + offs_m[:, None] * stride_om + offs_n[None, :], y, mask=mask)

    @triton.jit(do_not_specialize=["MN", "N", "S"])
    def repro_combine_kernel(p_ptr, b_ptr, out_ptr, MN, N, S, HAS_BIAS: tl.constexpr, BLOCK: tl.constexpr):
        offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < MN
        y = tl.load(p_ptr + offs, mask=mask, other=0.0)
        for s in range(1, S):
            y = y + tl.load(p_ptr + s * MN + offs, mask=mask, other=0.0)
        if HAS_BIAS:
            y = y + tl.load(b_ptr + offs % N, mask=mask, other=0.0)
        nan = tl.full([BLOCK], 0x7FC00000, tl.int32).to(tl.float32, bitcast=True)
        y = tl.where(y != y, nan, y)
        tl.store(out_ptr + offs, y, mask=mask)

    return repro_tile_kernel, repro_combine_kernel


def tile_matmul(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, cfg: LaunchConfig):
    """fp32 [M, N] = x [M, K] @ weight[N, K].T (+ bias) with the Triton tile kernel.
    Returns (out, compiled tile kernel) so callers can audit the PTX."""
    tile, comb = kernels()
    m, k = x.shape
    n = weight.shape[0]
    dev = x.device
    s = split_count(k)
    out = torch.empty((m, n), dtype=torch.float32, device=dev)
    b = bias.to(device=dev, dtype=torch.float32).contiguous() if bias is not None else out
    split = cfg.split_parallel and s > 1
    target = torch.empty((s, m, n), dtype=torch.float32, device=dev) if split else out
    grid = (
        (m + cfg.block_m - 1) // cfg.block_m,
        (n + cfg.block_n - 1) // cfg.block_n,
        s if split else 1,
    )
    compiled = tile[grid](
        x, weight, b, target, m, n, k, s,
        x.stride(0), x.stride(1), weight.stride(0), weight.stride(1), m * n, n,
        HAS_BIAS=bias is not None, SPLIT_PARALLEL=split, CHUNK_LEN=CHUNK,
        BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n, BLOCK_K=cfg.block_k,
        num_warps=cfg.num_warps, num_stages=cfg.num_stages, enable_fp_fusion=True,
    )  # fmt: skip
    if split:
        combine(target, bias, out)
    return out, compiled


def combine(partial: torch.Tensor, bias: torch.Tensor | None, out: torch.Tensor):
    _, comb = kernels()
    s, m, n = partial.shape
    b = bias.to(device=out.device, dtype=torch.float32).contiguous() if bias is not None else out
    grid = ((m * n + COMBINE_BLOCK - 1) // COMBINE_BLOCK,)
    return comb[grid](partial, b, out, m * n, n, s, HAS_BIAS=bias is not None, BLOCK=COMBINE_BLOCK,
                      num_warps=4, enable_fp_fusion=True)  # fmt: skip
