"""GPU tests of the reproducibility track: kernels bitwise equal to the CPU emulation over random
shapes and special values, batch invariance, independence from the launch configuration, a PTX
audit, the symmetric-memory all-reduce, and the three problems' references (CPU == GPU)."""

from __future__ import annotations

import math
import os
import re
import socket

import pytest
import torch
import torch.multiprocessing as mp

from tasks.reproducible.config import LaunchConfig
from tasks.reproducible.cpu_reference import (
    CANONICAL_NAN_BITS,
    canonicalize_nan,
    reproducible_bmm_cpu,
    reproducible_matmul_cpu,
)
from tasks.reproducible.gemm import reproducible_bmm, reproducible_matmul

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]

GEMV = LaunchConfig("gemv")
PERSISTENT = LaunchConfig("gemv_persistent")  # falls back to GEMV where it does not fit
SGEMM = LaunchConfig("sgemm")
SPLIT_SGEMM = LaunchConfig("sgemm", split_parallel=True)
TILES = [
    LaunchConfig("tile", block_m=16, block_n=16, block_k=16, num_warps=1, num_stages=1),
    LaunchConfig("tile", block_m=16, block_n=64, block_k=32, num_warps=4, num_stages=3, split_parallel=True),
    LaunchConfig("tile", block_m=32, block_n=32, block_k=64, num_warps=2, num_stages=2, split_parallel=True),
    LaunchConfig("tile", block_m=64, block_n=64, block_k=32, num_warps=4, num_stages=3),
    LaunchConfig("tile", block_m=128, block_n=128, block_k=16, num_warps=8, num_stages=3),
    LaunchConfig("tile", block_m=64, block_n=256, block_k=16, num_warps=8, num_stages=2),
]


def bits(t: torch.Tensor) -> torch.Tensor:
    return t.detach().contiguous().cpu().view(torch.int32)


def assert_same_bits(got: torch.Tensor, want: torch.Tensor, what: str = "") -> None:
    got, want = got.detach().cpu(), want.detach().cpu()
    assert got.shape == want.shape, (what, got.shape, want.shape)
    diff = (bits(got) != bits(want)).nonzero()
    if diff.numel():
        i = tuple(diff[0].tolist())
        pytest.fail(
            f"{what}: {diff.shape[0]} of {got.numel()} differ; first {i}: {got[i].item()!r} vs {want[i].item()!r}"
        )


def run_all(x, w, b, configs, what):
    want = reproducible_matmul_cpu(x, w, b)
    xc, wc = x.cuda(), w.cuda()
    bc = b.cuda() if b is not None else None
    for cfg in configs:
        assert_same_bits(reproducible_matmul(xc, wc, bc, config=cfg), want, f"{what} {cfg}")
    assert_same_bits(reproducible_matmul(xc, wc, bc), want, f"{what} table")
    return want


def random_case(m, n, k, seed, wdtype=torch.bfloat16, xdtype=torch.bfloat16, bias=True):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(m, k, generator=g).to(xdtype)
    w = (torch.randn(n, k, generator=g) * k**-0.5).to(wdtype)
    b = torch.randn(n, generator=g).to(torch.bfloat16) if bias else None
    return x, w, b


def test_random_shapes_match_the_cpu_emulation():
    g = torch.Generator().manual_seed(2024)
    ms, ns, ks = (
        [1, 2, 3, 5, 8, 13, 16, 17, 40, 64, 100],
        [1, 7, 64, 130, 500],
        [1, 5, 8, 100, 511, 513, 777, 1030, 2100],
    )
    for i in range(14):
        m = ms[int(torch.randint(len(ms), (1,), generator=g))]
        n = ns[int(torch.randint(len(ns), (1,), generator=g))]
        k = ks[int(torch.randint(len(ks), (1,), generator=g))]
        wdtype = torch.float16 if i % 3 == 0 else torch.bfloat16
        xdtype = torch.float32 if i % 2 else torch.bfloat16
        x, w, b = random_case(m, n, k, seed=i, wdtype=wdtype, xdtype=xdtype, bias=i % 4 != 1)
        configs = ([GEMV, PERSISTENT] if m <= 64 else []) + TILES[:3] + [SGEMM, SPLIT_SGEMM]
        run_all(x, w, b, configs, f"M={m} N={n} K={k} w={wdtype} x={xdtype}")


def test_llama_shapes_sampled():
    # Realistic K with a few rows and columns (the CPU side stays fast).
    for n, k in ((4096, 4096), (4096, 14336), (128, 4096)):
        x, w, b = random_case(3, 96, k, seed=n + k)
        run_all(x, w, b, [GEMV, PERSISTENT, SGEMM, SPLIT_SGEMM, TILES[1], TILES[4]], f"K={k}")


def special_values(k: int = 1100) -> tuple[torch.Tensor, torch.Tensor]:
    """x [6, k] and w [40, k] (bf16) full of subnormals, signed zeros, infinities, NaN, overflow."""
    g = torch.Generator().manual_seed(5)
    x = torch.randn(6, k, generator=g)
    w = torch.randn(40, k, generator=g)
    # subnormal activations and weights (bf16 has fp32's exponent range)
    x[0] = torch.randn(k, generator=g) * 2.0**-128
    w[0] = torch.randn(k, generator=g) * 2.0**-130
    w[1] = torch.randn(k, generator=g) * 2.0**-20  # products with x[0] underflow to subnormals or zero
    # signed zeros
    x[1, ::3] = -0.0
    w[2] = -0.0
    w[3, ::2] = 0.0
    # infinities and NaN in different chunks
    w[4, 10] = math.inf
    w[5, 10], w[5, 600] = math.inf, -math.inf
    w[6, 1050] = math.nan
    x[2, 700] = -math.inf
    x[3, 5] = math.nan
    # overflow of the fp32 chain
    w[7] = 3e38
    x[4] = 3e38
    return x.bfloat16(), w.bfloat16()


def test_special_values():
    xb, wb = special_values()
    want = run_all(xb, wb, None, [GEMV, PERSISTENT, SGEMM, SPLIT_SGEMM, *TILES], "special values")
    assert math.isinf(want[4, 7].item())
    assert bits(want)[0, 6].item() == CANONICAL_NAN_BITS  # x * NaN


# Every variant of the CUDA kernels a sweep may pick (bench/repro_gemm.py --sweep).
PERSISTENT_VARIANTS = [(8, 1), (5, 1), (4, 1), (3, 1), (2, 1), (4, 2), (2, 2)]  # (most slots, programs per SM)
ROW_BLOCK_VARIANTS = [(1, 64, 4), (1, 128, 3), (1, 256, 2), (2, 32, 4), (2, 64, 3)]
SGEMM_VARIANTS = [(8, 16, 3, 2), (8, 8, 4, 2), (8, 32, 4, 2), (16, 16, 3, 2), (16, 8, 4, 2)]


def _every_cuda_kernel(x, w, b, what):
    """The persistent GEMV (each variant, each row capacity >= M, the weight static or not), the
    row-block GEMV (each variant) and the SGEMM (each variant, whole and split by chunk), against
    the emulation."""
    from tasks.reproducible import cuda_kernels as ck

    want = reproducible_matmul_cpu(x, w, b)
    xc, wc = x.cuda(), w.cuda()
    bc = b.cuda() if b is not None else None
    m, k = x.shape
    assert ck.gemv_supports(wc), "pick K so that weight rows are 16-byte aligned"
    checked = 0
    for mb in (r for r in ck.PERSISTENT_MB if r >= m):
        for v in PERSISTENT_VARIANTS:
            if ck.gemv_persistent_fits(mb, w.shape[0], k, v, x.dtype):
                for static in (False, True):
                    got = ck.gemv_persistent(xc, wc, bc, mb, v, static_weight=static)
                    assert_same_bits(got, want, f"{what} persistent gemv MB={mb} {v} static weight {static}")
                checked += 1
    if m <= 16:
        for v in ROW_BLOCK_VARIANTS:
            assert_same_bits(ck.gemv(xc, wc, bc, variant=v), want, f"{what} row-block gemv {v}")
    if k % 8 == 0:
        ncols = -(-w.shape[0] // 128)
        for v in SGEMM_VARIANTS:
            for split in (False, True):
                got = ck.sgemm(xc, wc, bc, split=split, variant=v)
                assert_same_bits(got, want, f"{what} sgemm {v} split={split}")
            for tail in sorted({1, ncols // 2, ncols - 1} - {0}):  # whole tiles, the last columns split by chunk
                got = ck.sgemm(xc, wc, bc, tail_columns=tail, variant=v)
                assert_same_bits(got, want, f"{what} sgemm {v} last {tail} of {ncols} tile columns split")
        if ck.sgemm_ws_runs_on(xc.device.index):
            for tail in sorted({0, 1, ncols // 2}):  # 256 x 128 whole tiles, the last columns split by chunk
                got = ck.sgemm(xc, wc, bc, tail_columns=tail, wide=True)
                assert_same_bits(got, want, f"{what} warp-specialized sgemm, last {tail} of {ncols} tile columns split")
    return checked


def test_every_cuda_kernel_variant_matches_the_emulation():
    # (3, 3000, 12296) and (4, 1600, 12296): 16-bit x kept 16-bit by the persistent GEMV (its fp32
    # copy would leave no room for two weight slots), rows past M at capacity 4, a last chunk of 8 k.
    cases = [(1, 5, 8), (2, 300, 1000), (3, 77, 4104), (4, 260, 520), (1, 33, 18944), (1, 1, 513), (1, 700, 4096),
             (3, 3000, 12296), (4, 1600, 12296)]  # fmt: skip
    checked = 0
    for i, (m, n, k) in enumerate(cases):
        for xdtype in (torch.float32, torch.bfloat16, torch.float16):
            wdtype = torch.float16 if i % 2 else torch.bfloat16
            x, w, b = random_case(m, n, k, seed=100 + i, wdtype=wdtype, xdtype=xdtype, bias=i % 3 != 0)
            if i == 3 and b is not None:
                b = b.float()  # fp32 bias too
            checked += _every_cuda_kernel(x, w, b, f"M={m} N={n} K={k} x={xdtype} w={wdtype}")
    assert checked > 50  # the persistent kernel really ran
    xb, wb = special_values(k=1096)  # rows 16-byte aligned; K % 16 == 8 leaves the SGEMM a partial tile
    for rows in (slice(0, 1), slice(0, 4), slice(2, 6), slice(0, 6)):
        _every_cuda_kernel(xb[rows], wb, None, f"special values rows {rows}")


def test_persistent_gemv_keeps_long_16bit_x_as_it_is():
    # Where x's fp32 copy would leave no room for two weight slots (M = 3 and 4 at K = 12296), the
    # persistent GEMV keeps 16-bit x as its 16-bit values: copied in by the producer where its rows
    # are 16-byte aligned, loaded by the computing threads where not (rows 5 values off), -0.0 past
    # K either way. Special values go through both; fp32 x of that length takes the row-block GEMV.
    from tasks.reproducible import cuda_kernels as ck
    from tasks.reproducible.gemm import effective_config

    k = 12296
    xb, wb = special_values(k=k)
    g = torch.Generator().manual_seed(6)
    # more rows than a program's one group (below that the row-block GEMV is faster and is taken)
    wb = torch.cat([wb, (torch.randn(1960, k, generator=g) * k**-0.5).bfloat16()])
    wc = wb.cuda()
    for dtype in (torch.bfloat16, torch.float16):
        for rows in (slice(0, 3), slice(2, 6)):
            x = xb[rows].to(dtype)
            m = x.shape[0]
            assert ck.gemv_persistent_plan(4, wb.shape[0], k, x_dtype=dtype).x_half
            want = reproducible_matmul_cpu(x, wb)
            wide = torch.zeros(m, k + 13, dtype=dtype)
            wide[:, 5 : 5 + k] = x
            for xv, how in ((x.cuda(), "aligned"), (wide.cuda()[:, 5 : 5 + k], "5 values off")):
                what = f"{dtype} x rows {rows} {how}"
                assert_same_bits(ck.gemv_persistent(xv, wc, None), want, f"{what}, persistent gemv")
                assert effective_config(m, wc, x_dtype=dtype).kernel == "gemv_persistent"
                assert_same_bits(reproducible_matmul(xv, wc), want, f"{what}, default path")
    assert effective_config(4, wc, x_dtype=torch.float32).kernel == "gemv"


def test_persistent_gemv_static_shared_memory_is_budgeted():
    from tasks.reproducible import cuda_kernels as ck
    from tasks.reproducible import cuda_rtc

    for mb in ck.PERSISTENT_MB:
        for x_copy, x_half in ((False, 0), (True, 0), (False, 1), (False, 2)):
            fn = ck.launcher(ck.gemv_persistent_name(mb, False, x_copy, x_half)).fn
            assert cuda_rtc.static_smem(fn) <= ck.PERSISTENT_STATIC_SMEM


def test_gemv_reads_nothing_past_k_of_a_padded_weight():
    # Rows at a padded stride, NaN in the padding: a kernel that used anything past K would return
    # NaN. K = 997 cuts the last 16-byte vector of each row; K = 1024 (a multiple of the chunk) takes
    # the persistent GEMV's one-copy-per-stage view of the weight.
    from tasks.reproducible import cuda_kernels as ck

    for m, n, k, ld in ((3, 70, 997, 1000), (2, 300, 1024, 1032)):
        x, w, b = random_case(m, n, k, seed=21, bias=True)
        padded = torch.full((n, ld), math.nan, dtype=w.dtype)
        padded[:, :k] = w
        wc = padded.cuda()[:, :k]
        assert ck.gemv_supports(wc) and wc.stride(0) == ld
        want = reproducible_matmul_cpu(x, w, b)
        xc, bc = x.cuda(), b.cuda()
        for v in (v for v in PERSISTENT_VARIANTS if ck.gemv_persistent_fits(m, n, k, v)):
            assert_same_bits(ck.gemv_persistent(xc, wc, bc, 0, v), want, f"K={k} padded, persistent gemv {v}")
        for v in ROW_BLOCK_VARIANTS:
            assert_same_bits(ck.gemv(xc, wc, bc, variant=v), want, f"K={k} padded, row-block gemv {v}")
        assert_same_bits(reproducible_matmul(xc, wc, bc), want, f"K={k} padded, default path")


def test_persistent_gemv_without_the_one_copy_view(monkeypatch):
    # A driver that refused the 3-D view of the weight must leave the per-chunk copies, same bits.
    from tasks.reproducible import cuda_kernels as ck
    from tasks.reproducible import cuda_rtc

    encode, ranks = cuda_rtc.encode_tensor_map, []

    def refuse_3d(address, dims, strides, box):
        ranks.append(len(dims))
        if len(dims) == 3:
            raise RuntimeError("CUDA driver tensor map encoding failed (1): invalid argument")
        return encode(address, dims, strides, box)

    monkeypatch.setattr(cuda_rtc, "encode_tensor_map", refuse_3d)
    ck._weight_tensor_map.cache_clear()
    try:
        x, w, b = random_case(3, 500, 2048, seed=33, bias=True)
        got = ck.gemv_persistent(x.cuda(), w.cuda(), b.cuda())
        assert_same_bits(got, reproducible_matmul_cpu(x, w, b), "per-chunk copies after a refused 3-D map")
        assert ranks == [3, 2]
    finally:
        ck._weight_tensor_map.cache_clear()


def _chain(x, weights, live, links, gemvs):
    """x through `links` GEMVs (link i by gemvs[i % len(gemvs)]), link i reading the output of
    link i - 1. Most links follow the GEMV ahead directly, with its weight; every fourth reads the
    weight `live`, which a copy kernel rewrites just before it. Each input is dropped as soon as
    the next link is launched, so the allocator may give a link's output the memory the GEMV ahead
    is still reading; every fifth output is cloned (another kernel in between) for comparison."""
    kept = []
    for i in range(links):
        w = weights[i % 2]
        if i % 4 == 3:
            live.copy_(weights[(i // 4) % 2])
            w = live
        x = gemvs[i % len(gemvs)](x, w, None)
        if i % 5 == 4:
            kept.append(x.clone())
    return x, kept


def test_gemvs_launched_back_to_back_read_and_write_after_the_kernel_ahead(monkeypatch):
    # Launched as programmatic dependents, consecutive GEMVs (and the row-block GEMV's combine)
    # overlap: each must still read the x the kernel ahead wrote and the weight a copy kernel
    # rewrote just before, and store only once the kernel ahead is done with what it reads. The
    # same chain launched one kernel after another, in eager calls and replayed from a CUDA graph,
    # gives the same bits; the first link is checked against the CPU. So does the chain whose
    # persistent GEMVs are told their weight is static wherever it is (all but the rewritten one),
    # which start copying it before the kernel ahead ends.
    from tasks.reproducible import cuda_kernels as ck

    if torch.cuda.get_device_capability() < (9, 0):
        pytest.skip("the persistent GEMV and programmatic launches need sm_90")
    assert ck.PROGRAMMATIC_GEMV
    g = torch.Generator().manual_seed(71)
    persistent, row_block = ck.gemv_persistent, ck.gemv
    # (4, 3072): x copied in by the producer (XCOPY), into slots the early copies must leave free.
    for m, k, gemvs in ((1, 4096, (persistent,)), (4, 2048, (persistent,)), (16, 2048, (row_block,)),
                        (4, 1536, (persistent, row_block)), (4, 3072, (persistent,))):  # fmt: skip
        weights = [(torch.randn(k, k, generator=g) * k**-0.5).bfloat16().cuda() for _ in range(2)]
        x0 = torch.randn(m, k, generator=g).cuda()
        live = torch.empty_like(weights[0])

        def static_persistent(x, w, b, live=live):
            return persistent(x, w, b, static_weight=w is not live)

        static_gemvs = tuple(static_persistent if f is persistent else f for f in gemvs)
        links, case = 24, f"M={m} K={k} {'/'.join(f.__name__ for f in gemvs)}"
        overlapped, outs = _chain(x0, weights, live, links, gemvs)
        want_first = reproducible_matmul_cpu(x0.cpu(), weights[0].cpu(), None)
        live.copy_(weights[0])
        assert_same_bits(gemvs[0](x0, live, None), want_first, f"{case} first link")
        static, static_outs = _chain(x0, weights, live, links, static_gemvs)
        graph, static_graph = torch.cuda.CUDAGraph(), torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            replayed, graph_outs = _chain(x0, weights, live, links, gemvs)
        with torch.cuda.graph(static_graph):
            static_replayed, _ = _chain(x0, weights, live, links, static_gemvs)
        for _ in range(3):
            graph.replay()
            static_graph.replay()
        torch.cuda.synchronize()
        monkeypatch.setattr(ck, "PROGRAMMATIC_GEMV", False)
        serial, serial_outs = _chain(x0, weights, live, links, gemvs)
        monkeypatch.setattr(ck, "PROGRAMMATIC_GEMV", True)
        assert torch.isfinite(serial).all()
        assert_same_bits(overlapped, serial, f"{case}, {links} links, eager")
        assert_same_bits(replayed, serial, f"{case}, {links} links, graph")
        assert_same_bits(static, serial, f"{case}, {links} links, static weights, eager")
        assert_same_bits(static_replayed, serial, f"{case}, {links} links, static weights, graph")
        for i, (a, b, c, d) in enumerate(zip(outs, graph_outs, serial_outs, static_outs)):
            assert_same_bits(a, c, f"{case} link {i}, eager")
            assert_same_bits(b, c, f"{case} link {i}, graph")
            assert_same_bits(d, c, f"{case} link {i}, static weights")


def test_underflowed_chunks_keep_negative_zero():
    # Every chunk chain ends at -0.0 (products underflow); padding the last chunk must not turn
    # it into +0.0 on any path.
    k = 700
    x = torch.full((3, k), 1e-30).bfloat16()
    w = torch.full((20, k), -1e-30).bfloat16()
    want = run_all(x, w, None, [GEMV, PERSISTENT, SGEMM, SPLIT_SGEMM, *TILES], "underflow")
    assert want[0, 0].item() == 0 and math.copysign(1.0, want[0, 0].item()) < 0


def test_batch_invariance_across_kernels():
    x, w, b = random_case(600, 300, 1500, seed=9)
    xc, wc, bc = x.cuda(), w.cuda(), b.cuda()
    full = reproducible_matmul(xc, wc, bc)  # prefill: the SGEMM
    assert_same_bits(reproducible_matmul(xc, wc, bc, config=TILES[4]), full, "Triton prefill tile")
    rows = [0, 1, 15, 16, 63, 64, 299, 599]
    for i in rows:
        assert_same_bits(reproducible_matmul(xc[i : i + 1], wc, bc), full[i : i + 1], f"row {i} alone")
    for lo, hi in ((0, 7), (5, 21), (64, 128), (100, 164), (0, 300)):
        assert_same_bits(reproducible_matmul(xc[lo:hi], wc, bc), full[lo:hi], f"rows {lo}:{hi}")
    assert_same_bits(full[[0, 599]], reproducible_matmul_cpu(x[[0, 599]], w, b), "vs CPU")


def test_launch_configuration_does_not_change_bits():
    x, w, b = random_case(33, 300, 1500, seed=3)
    xc, wc, bc = x.cuda(), w.cuda(), b.cuda()
    first = reproducible_matmul(xc, wc, bc, config=TILES[0])
    extra = [
        LaunchConfig("tile", block_m=32, block_n=128, block_k=128, num_warps=4, num_stages=4),
        LaunchConfig("tile", block_m=16, block_n=32, block_k=16, num_warps=2, num_stages=2, split_parallel=True),
    ]
    for cfg in [GEMV, PERSISTENT, SGEMM, SPLIT_SGEMM, *TILES[1:], *extra]:
        assert_same_bits(reproducible_matmul(xc, wc, bc, config=cfg), first, str(cfg))
    # non-contiguous operands (strided views) give the same bits
    xt = torch.empty(1500, 33, dtype=x.dtype, device="cuda").t()
    xt.copy_(xc)
    assert_same_bits(reproducible_matmul(xt, wc, bc, config=TILES[3]), first, "strided x")
    assert_same_bits(reproducible_matmul(xc, wc, bc), reproducible_matmul_cpu(x, w, b), "vs CPU")


def test_sgemm_transposed_copy_of_x_is_exact():
    from tasks.reproducible import cuda_kernels as ck

    for m, k in [(1, 8), (1, 13), (5, 77), (63, 200), (130, 4104), (260, 1000)]:
        wide = torch.randn(m, k + 24, device="cuda")
        for dtype in (torch.float32, torch.bfloat16, torch.float16):
            for x in (wide.to(dtype)[:, :k], wide.to(dtype)[:, 3 : k + 3], wide.to(dtype)[:, :k].contiguous()):
                rows = -(-m // 128) * 128
                got = ck.transpose_to_f32(x, rows)
                assert got.shape == (k, rows)
                assert_same_bits(got[:, :m], x.float().t(), f"transpose {m}x{k} {dtype} strides {x.stride()}")


def test_batched_gemv_matches_the_emulation():
    g = torch.Generator().manual_seed(4)
    q = torch.randn(12, 4, 128, generator=g)
    cache = torch.randn(12, 40, 128, generator=g).bfloat16()  # rows 0..36 used: K = 128, N = 37
    want = reproducible_bmm_cpu(q, cache[:, :37])
    assert_same_bits(reproducible_bmm(q.cuda(), cache.cuda()[:, :37]), want, "scores")
    # transposed values with a row stride larger than K (a cache with spare capacity)
    vt = torch.randn(12, 128, 1000, generator=g).bfloat16()
    p = torch.rand(12, 4, 613, generator=g)
    want = reproducible_bmm_cpu(p, vt[:, :, :613])
    assert_same_bits(reproducible_bmm(p.cuda(), vt.cuda()[:, :, :613]), want, "values")
    # 16-bit queries read in place: rows 131 apart, each starting 6 bytes into a 16-byte line
    for dtype in (torch.bfloat16, torch.float16):
        qv = torch.randn(12, 4, 131, generator=g).to(dtype)[:, :, 3:]
        want = reproducible_bmm_cpu(qv, cache[:, :37])
        assert_same_bits(reproducible_bmm(qv.cuda(), cache.cuda()[:, :37]), want, f"{dtype} strided scores")


def test_gemv_reads_strided_and_misaligned_x_in_its_own_dtype():
    # x is read in place in its own dtype: views whose rows start off a 16-byte boundary (one value
    # at a time) or on one (eight at a time), with a row stride larger than K. At K = 4104 x takes
    # the persistent GEMV's threads more than one round trip: its producer copies x where the rows
    # and their stride are 16-byte aligned (the last case), its computing threads load it where not.
    from tasks.reproducible import cuda_kernels as ck

    cases = (
        (16, 300, 1032, 3, 11),
        (9, 130, 1024, 8, 21),
        (2, 70, 520, 1, 7),
        (3, 70, 4104, 1, 7),
        (3, 70, 4104, 8, 24),
        (4, 2000, 12296, 3, 11),  # 16-bit x kept 16-bit (persistent GEMV): loaded by its threads
        (3, 2000, 12296, 8, 24),  # and copied in by its producer, a chunk at a time
    )
    for i, (m, n, k, offset, pad) in enumerate(cases):
        for dtype in (torch.float32, torch.bfloat16, torch.float16):
            x, w, b = random_case(m, n, k, seed=300 + i, xdtype=dtype)
            wide = torch.randn(m, k + pad).to(dtype)
            wide[:, offset : offset + k] = x
            xv = wide.cuda()[:, offset : offset + k]
            want = reproducible_matmul_cpu(x, w, b)
            wc, bc = w.cuda(), b.cuda()
            what = f"M={m} K={k} x {dtype} at offset {offset}"
            for v in ROW_BLOCK_VARIANTS:
                assert_same_bits(ck.gemv(xv, wc, bc, variant=v), want, f"{what}, row-block gemv {v}")
            if ck.gemv_persistent_fits(m, n, k, x_dtype=dtype):
                assert_same_bits(ck.gemv_persistent(xv, wc, bc), want, f"{what}, persistent gemv")
            assert_same_bits(reproducible_matmul(xv, wc, bc), want, f"{what}, default path")


AUDIT_FORBIDDEN = re.compile(r"\b(?:w?mma|hmma)\b|\.tf32|\bwgmma")


def _audit(ptx: str, what: str) -> None:
    assert "fma.rn.f32" in ptx, f"{what}: no fma.rn.f32"
    assert not AUDIT_FORBIDDEN.search(ptx), (
        f"{what}: tensor-core or TF32 instruction: {AUDIT_FORBIDDEN.search(ptx).group(0)}"
    )
    f32_ftz = [line for line in ptx.splitlines() if ".ftz" in line and ".f32" in line]
    assert not f32_ftz, f"{what}: flush-to-zero arithmetic: {f32_ftz[:3]}"


@pytest.mark.skipif(
    not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0), reason="needs sm_90a (H100, H200)"
)
def test_warp_specialized_sgemm_matches_the_emulation():
    # M past a 256-row tile, N past a 128-column one, K past a 16-k stage and a 512-k chunk; a
    # stage of which only the first 8 k are in; one row; fp16 and bf16 weights; every x dtype.
    from tasks.reproducible import cuda_kernels as ck

    cases = [(300, 260, 1096), (513, 130, 4104), (1, 128, 8), (256, 384, 1536), (70, 1000, 520)]
    for i, (m, n, k) in enumerate(cases):
        for xdtype in (torch.float32, torch.bfloat16, torch.float16):
            x, w, b = random_case(m, n, k, seed=300 + i, wdtype=torch.float16 if i % 2 else torch.bfloat16,
                                  xdtype=xdtype, bias=i != 2)  # fmt: skip
            want = reproducible_matmul_cpu(x, w, b)
            got = ck.sgemm(x.cuda(), w.cuda(), b.cuda() if b is not None else None, wide=True)
            assert_same_bits(got, want, f"warp-specialized sgemm M={m} N={n} K={k} x={xdtype}")
    xb, wb = special_values(k=1096)
    got = ck.sgemm(xb.cuda(), wb.cuda(), None, wide=True)
    assert_same_bits(got, reproducible_matmul_cpu(xb, wb, None), "warp-specialized sgemm, special values")
    # The default launch takes it where its tiles make enough waves, and the 128 x 128 tiles below.
    dev = torch.cuda.current_device()
    sms = torch.cuda.get_device_properties(dev).multi_processor_count
    assert ck._sgemm_ws_pays(4096, 4096, dev)
    assert not ck._sgemm_ws_pays(512, 14336, dev)
    assert ck._sgemm_ws_pays(256, 128 * ck.SGEMM_WS_MIN_WAVES * sms, dev)
    assert not ck._sgemm_ws_pays(256, 128 * (ck.SGEMM_WS_MIN_WAVES * sms - 1), dev)
    ptx = ck.sm90a_ptx()
    _audit(ptx, "cuda sm_90a sgemm")
    assert "setmaxnreg" in ptx and not re.search(r"\badd\.f32\b|\bmul\.f32\b", ptx)


def test_ptx_audit():
    from tasks.reproducible import cuda_kernels, triton_gemm

    x, w, b = random_case(20, 64, 600, seed=1)
    for cfg in (TILES[1], TILES[4]):
        _, compiled = triton_gemm.tile_matmul(x.cuda(), w.cuda(), b.cuda(), cfg)
        _audit(compiled.asm["ptx"], f"triton {cfg}")
    gemv_ptx = cuda_kernels.ptx()
    _audit(gemv_ptx, "cuda gemv")
    # The CUDA module is built with -fmad=false: no multiply may be contracted behind our back,
    # and every fp32 add is an explicit round-to-nearest add.
    assert not re.search(r"\badd\.f32\b|\bmul\.f32\b", gemv_ptx)


# --- distributed: two ranks on one GPU (shared-GPU mode) ------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


PROBLEM_DIMS = {
    "repro_linear": [{"M": 4, "N": 64, "K": 200}, {"M": 5, "N": 256, "K": 1300}, {"M": 80, "N": 96, "K": 700}],
    "repro_tp_row_linear": [{"M": 4, "N": 64, "K": 256}, {"M": 3, "N": 200, "K": 2050}],
    "repro_decode_block": [
        {"B": 2, "D": 128, "H": 8, "KVH": 8, "F": 256, "T": 16},
        {"B": 3, "D": 256, "H": 8, "KVH": 4, "F": 512, "T": 600},
    ],
}


def _gpu_worker(rank: int, world: int, port: int, out_dir: str) -> None:
    os.environ["TORCH_SYMM_MEM_ALLOW_OVERLAPPING_DEVICES"] = "1"
    import torch.distributed as dist

    from tasks import load_reference
    from tasks.reproducible.allreduce import deterministic_all_reduce
    from tasks.spec import InputContext

    torch.cuda.set_device(0)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    report = []
    p = (torch.randn(1000, generator=torch.Generator().manual_seed(rank)) * 10).cuda()
    a = deterministic_all_reduce(p, method="symm")
    bref = deterministic_all_reduce(p, method="gather")
    report.append(("allreduce symm == gather", torch.equal(bits(a), bits(bref))))
    for pid, dim_list in PROBLEM_DIMS.items():
        ref = load_reference(pid)
        for dims in dim_list:
            rng = torch.Generator().manual_seed(11 + rank)
            shared = torch.Generator().manual_seed(5)
            ctx = InputContext(rank, world, dims, torch.bfloat16, torch.device("cpu"), rng, shared)
            inputs = ref.make_inputs(ctx)
            cpu_out = ref.solution(*inputs)
            gpu_out = ref.solution(*[t.cuda() if isinstance(t, torch.Tensor) else t for t in inputs])
            same = torch.equal(bits(cpu_out), bits(gpu_out))
            report.append((f"{pid} {dims} cpu == gpu", same))
            torch.save(gpu_out.cpu(), os.path.join(out_dir, f"{pid}-{len(report)}-rank{rank}.pt"))
    torch.save(report, os.path.join(out_dir, f"report{rank}.pt"))
    dist.barrier()
    dist.destroy_process_group()


def test_problems_and_allreduce_bitwise_cpu_vs_gpu(tmp_path):
    ctx = mp.get_context("spawn")
    port = _free_port()
    procs = [ctx.Process(target=_gpu_worker, args=(r, 2, port, str(tmp_path))) for r in range(2)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(600)
    assert [proc.exitcode for proc in procs] == [0, 0]
    for rank in range(2):
        report = torch.load(tmp_path / f"report{rank}.pt")
        failed = [name for name, ok in report if not ok]
        assert not failed, f"rank {rank}: {failed}"
    # row-parallel problems: both ranks hold the same bits
    for name in os.listdir(tmp_path):
        if name.startswith(("repro_tp_row_linear", "repro_decode_block")) and name.endswith("rank0.pt"):
            r0 = torch.load(tmp_path / name)
            r1 = torch.load(tmp_path / name.replace("rank0", "rank1"))
            assert torch.equal(bits(r0), bits(r1)), name


# --- the symmetric-memory all-reduce over many calls ---------------------------------------------

ALLREDUCE_SIZES = (1, 1000, 4099, 300_000)  # one block, a scalar tail, several blocks


def _partial(call: int, rank: int, n: int) -> torch.Tensor:
    """Rank `rank`'s partial at call `call`, the same on every rank; with special values."""
    p = torch.randn(n, generator=torch.Generator().manual_seed(1000 * call + rank)) * 10.0 ** (call % 5)
    if n > 8 and call % 3 == 0:
        p[:6] = torch.tensor([float("inf"), float("nan"), -0.0, 1e-40, -1e-45, float("-inf")])
    return p


def _rank_order_sum(call: int, world: int, n: int) -> torch.Tensor:
    y = _partial(call, 0, n)
    for r in range(1, world):
        y = y + _partial(call, r, n)
    return canonicalize_nan(y)


def _allreduce_worker(rank: int, world: int, port: int, out_dir: str) -> None:
    os.environ["TORCH_SYMM_MEM_ALLOW_OVERLAPPING_DEVICES"] = "1"
    import torch.distributed as dist

    from tasks.reproducible.allreduce import deterministic_all_reduce

    dev = torch.device("cuda", rank % torch.cuda.device_count())  # one GPU per rank where there are enough
    torch.cuda.set_device(dev)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    failed = []
    # Eager calls in a rotating order of sizes (each size's buffer alternates its halves), some
    # from a partial that starts off a 16-byte boundary.
    for call in range(24):
        n = ALLREDUCE_SIZES[call % len(ALLREDUCE_SIZES)]
        p = _partial(call, rank, n).to(dev)
        if call % 4 == 1:
            p = torch.cat([torch.zeros(1, device=dev), p])[1:]
        got = deterministic_all_reduce(p, method="symm")
        if not torch.equal(bits(got), bits(_rank_order_sum(call, world, n))):
            failed.append(f"eager call {call} (n={n})")
    # Captured in a CUDA graph: replays count their calls on the device, so the halves still alternate.
    static = [torch.zeros(n, device=dev) for n in ALLREDUCE_SIZES[1:3]]
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        outs = [deterministic_all_reduce(s, method="symm") for s in static]
    for replay in range(3):
        call = 100 + replay
        for s in static:
            s.copy_(_partial(call, rank, s.numel()))
        graph.replay()
        for s, o in zip(static, outs):
            if not torch.equal(bits(o), bits(_rank_order_sum(call, world, s.numel()))):
                failed.append(f"graph replay {replay} (n={s.numel()})")
    torch.save(failed, os.path.join(out_dir, f"allreduce{rank}.pt"))
    dist.barrier()
    dist.destroy_process_group()


@pytest.mark.parametrize("world", [2, 3])
def test_symm_all_reduce_rank_order_over_many_calls(tmp_path, world):
    """Every call, eager or replayed from a CUDA graph, gives the rank-order fp32 sum on every
    rank (from three ranks on, the order matters): the on-device call count and the alternating
    halves keep consecutive calls from reading each other's data."""
    ctx = mp.get_context("spawn")
    port = _free_port()
    procs = [ctx.Process(target=_allreduce_worker, args=(r, world, port, str(tmp_path))) for r in range(world)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(600)
    assert [proc.exitcode for proc in procs] == [0] * world
    for rank in range(world):
        assert torch.load(tmp_path / f"allreduce{rank}.pt") == [], f"rank {rank}"
