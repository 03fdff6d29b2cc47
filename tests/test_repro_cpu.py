"""CPU tests of the reproducibility track: exact fp32 FMA emulation, the fixed reduction order,
batch invariance, the configuration table, the drop-in Linear, and the three bitwise problems."""

from __future__ import annotations

import math
import os
import re
import socket
import struct
from fractions import Fraction

import pytest
import torch
import torch.multiprocessing as mp
from torch import nn

from tasks.reproducible import config, cpu_native
from tasks.reproducible.config import CHUNK, LaunchConfig, chunk_bounds, launch_config, m_bucket, split_count
from tasks.reproducible.cpu_reference import (
    CANONICAL_NAN_BITS,
    canonicalize_nan,
    chain_partials,
    chain_partials_emulated,
    fma_f32,
    reproducible_matmul_cpu,
)
from tasks.reproducible.gemm import reproducible_bmm, reproducible_matmul
from tasks.reproducible.linear import ReproducibleLinear, patch_linear_layers
from tasks.reproducible.ops import exp as repro_exp
from tasks.reproducible.ops import rms_norm as repro_rms_norm
from tasks.reproducible.ops import row_sum as repro_row_sum

F32_MAX = Fraction(struct.unpack("<f", struct.pack("<I", 0x7F7FFFFF))[0])


# --- an independent model of IEEE fp32 arithmetic, on exact rationals ------------------------


def round_f32(value: Fraction) -> float:
    """Round an exact rational to the nearest fp32 (ties to even), with subnormals and overflow."""
    if value == 0:
        return 0.0
    sign = -1.0 if value < 0 else 1.0
    a = abs(value)
    e = a.numerator.bit_length() - a.denominator.bit_length()
    if Fraction(2) ** e > a:
        e -= 1
    # a in [2^e, 2^(e+1)); the ulp is 2^(e-23) for normals and 2^-149 for subnormals.
    ulp_exp = max(e, -126) - 23
    scaled = a / Fraction(2) ** ulp_exp
    q, r = divmod(scaled.numerator, scaled.denominator)
    twice = 2 * r
    if twice > scaled.denominator or (twice == scaled.denominator and q % 2 == 1):
        q += 1
    result = Fraction(q) * Fraction(2) ** ulp_exp
    if result > F32_MAX:
        return sign * math.inf
    return sign * float(result)


def exact_fma(a: float, b: float, c: float) -> float:
    """IEEE fp32 fma(a, b, c) for finite fp32 inputs, signs of zero included."""
    prod = Fraction(a) * Fraction(b)
    total = prod + Fraction(c)
    if total == 0:
        prod_negative = math.copysign(1.0, a) * math.copysign(1.0, b) < 0
        if prod == 0 and c == 0:  # both zero: negative only if both are -0
            return -0.0 if (prod_negative and math.copysign(1.0, c) < 0) else 0.0
        return 0.0  # exact cancellation rounds to +0
    return round_f32(total)


def exact_reproducible_matmul(
    x: list[list[float]], w: list[list[float]], bias: list[float] | None
) -> list[list[float]]:
    """The documented order, one scalar at a time on exact rationals: chunks of CHUNK k, each an
    fp32 FMA chain from +0.0, then the chunk results added in order, then the bias."""
    k = len(x[0])
    out = []
    for row in x:
        out_row = []
        for n, wrow in enumerate(w):
            y = None
            for k_lo, k_hi in chunk_bounds(k):
                p = 0.0
                for kk in range(k_lo, k_hi):
                    p = exact_fma(row[kk], wrow[kk], p)
                y = p if y is None else exact_add(y, p)
            if bias is not None:
                y = exact_add(y, bias[n])
            out_row.append(y)
        out.append(out_row)
    return out


def exact_add(a: float, b: float) -> float:
    if math.isinf(a) or math.isinf(b) or math.isnan(a) or math.isnan(b):
        return a + b
    if a == 0 and b == 0:
        return -0.0 if (math.copysign(1, a) < 0 and math.copysign(1, b) < 0) else 0.0
    return exact_fma(a, 1.0, b)


def bits(t: torch.Tensor) -> torch.Tensor:
    return t.contiguous().view(torch.int32)


def assert_same_bits(a: torch.Tensor, b: torch.Tensor) -> None:
    assert a.shape == b.shape and a.dtype == b.dtype
    diff = (bits(a) != bits(b)).nonzero()
    assert diff.numel() == 0, (
        f"{diff.shape[0]} elements differ, first at {diff[0].tolist()}: {a[tuple(diff[0])]} vs {b[tuple(diff[0])]}"
    )


# --- the fp32 FMA emulation -------------------------------------------------------------------


def test_fma_matches_exact_rounding_over_wide_exponent_ranges():
    g = torch.Generator().manual_seed(1)
    n = 2000
    a = torch.randn(n, generator=g) * torch.exp2(torch.randint(-62, 62, (n,), generator=g).float())
    b = torch.randn(n, generator=g) * torch.exp2(torch.randint(-62, 62, (n,), generator=g).float())
    c = torch.randn(n, generator=g) * torch.exp2(torch.randint(-148, 125, (n,), generator=g).float())
    got = fma_f32(a, b, c)
    for i in range(n):
        want = exact_fma(a[i].item(), b[i].item(), c[i].item())
        assert struct.pack("<f", got[i].item()) == struct.pack("<f", want), (a[i], b[i], c[i], got[i], want)


def test_fma_rounds_once_where_double_rounding_fails():
    # a*b = 2^-24 - 2^-54 exactly; plus 1 + 2^-23 the sum sits just below the midpoint between
    # 1 + 2^-23 and 1 + 2^-22. Rounding to double first lands on the midpoint, then ties to even
    # pick the wrong neighbour.
    a = torch.tensor([2.0**-24 * (1 + 2.0**-15)])
    b = torch.tensor([1 - 2.0**-15])
    c = torch.tensor([1 + 2.0**-23])
    naive = (a.double() * b.double() + c.double()).float()
    assert naive.item() == 1 + 2.0**-22
    assert fma_f32(a, b, c).item() == 1 + 2.0**-23 == exact_fma(a.item(), b.item(), c.item())


def test_fma_subnormals_and_signed_zeros():
    tiny = 2.0**-149
    cases = [
        (tiny, 0.5, 0.0),  # halfway to zero: ties to even gives +0
        (tiny, 0.75, 0.0),  # rounds up to the smallest subnormal
        (-tiny, 0.5, 0.0),  # exactly -2^-150, halfway: ties to even give -0
        (1e-30, -1e-30, 0.0),  # product underflows: -0
        (-0.0, 1.0, -0.0),  # -0 + -0 = -0
        (-0.0, 1.0, 0.0),  # -0 + +0 = +0
        (3.0 * 2.0**-130, 2.0**-3, tiny),  # subnormal result
        (2.0**-126, 1 - 2.0**-24, 0.0),  # just below the smallest normal
    ]
    a = torch.tensor([c[0] for c in cases])
    b = torch.tensor([c[1] for c in cases])
    c = torch.tensor([c[2] for c in cases])
    got = fma_f32(a, b, c)
    for i, (x, y, z) in enumerate(cases):
        want = exact_fma(float(a[i]), float(b[i]), float(c[i]))
        assert struct.pack("<f", got[i].item()) == struct.pack("<f", want), (x, y, z, got[i].item(), want)
    assert math.copysign(1, got[3].item()) < 0 and got[3].item() == 0  # underflow keeps the sign


def test_fma_infinities_and_nan():
    inf, nan = math.inf, math.nan
    a = torch.tensor([inf, inf, 0.0, 3e38, 1.0, nan])
    b = torch.tensor([2.0, 2.0, inf, 3e38, 1.0, 1.0])
    c = torch.tensor([1.0, -inf, 1.0, 0.0, inf, 1.0])
    got = fma_f32(a, b, c)
    assert got[0].item() == inf
    assert math.isnan(got[1].item()) and math.isnan(got[2].item()) and math.isnan(got[5].item())
    assert got[3].item() == inf  # overflow
    assert got[4].item() == inf


# --- the reduction order ----------------------------------------------------------------------


def _require_compiled_chains() -> None:
    if cpu_native.library() is None:
        if os.environ.get("CI"):
            pytest.fail("the CPU reference's compiled chains did not build (a C compiler is part of CI)")
        pytest.skip("no C compiler: only the float64 emulation runs here")


@pytest.fixture(params=["compiled", "emulated"])
def chains(request, monkeypatch):
    """Runs a test on the compiled FMA chains and again on the float64 emulation."""
    if request.param == "compiled":
        _require_compiled_chains()
    else:
        monkeypatch.setattr(cpu_native, "chain_partials", lambda x32, w32: None)
    return request.param


def test_compiled_fma_matches_exact_rounding_over_wide_exponent_ranges():
    # Chains of two: fma(c, 1, +0) = c, then fma(a, b, c): every general FMA through the C path.
    _require_compiled_chains()
    g = torch.Generator().manual_seed(2)
    n = 2000
    a = torch.randn(n, generator=g) * torch.exp2(torch.randint(-62, 62, (n,), generator=g).float())
    b = torch.randn(n, generator=g) * torch.exp2(torch.randint(-62, 62, (n,), generator=g).float())
    c = torch.randn(n, generator=g) * torch.exp2(torch.randint(-148, 125, (n,), generator=g).float())
    c[:4] = torch.tensor([2.0**-149, -(2.0**-149), 3 * 2.0**-149, 1 + 2.0**-23])  # subnormal and tie-prone sums
    a[3], b[3] = 2.0**-24 * (1 + 2.0**-15), 1 - 2.0**-15  # the double-rounding trap
    x = torch.stack([c, a], dim=1)[:, None, :]  # [n, 1, 2]
    w = torch.stack([torch.ones(n), b], dim=1)[:, None, :]
    got = cpu_native.chain_partials(x, w)[:, 0, 0, 0]
    for i in range(n):
        want = exact_fma(a[i].item(), b[i].item(), c[i].item())
        assert struct.pack("<f", got[i].item()) == struct.pack("<f", want), (a[i], b[i], c[i], got[i], want)


def test_compiled_chains_equal_the_emulation():
    _require_compiled_chains()
    g = torch.Generator().manual_seed(8)
    specials = torch.tensor([0.0, -0.0, 2.0**-149, -(2.0**-140), 2.0**-126, 3e38, -3e38, math.inf, -math.inf, math.nan])
    for bsz, m, n, k in [(1, 1, 1, 1), (2, 3, 5, 7), (1, 4, 600, 512), (3, 2, 77, 1300), (1, 5, 1030, 2049)]:
        x = torch.randn(bsz, m, k, generator=g) * torch.exp2(torch.randint(-70, 40, (bsz, m, k), generator=g).float())
        w = torch.randn(bsz, n, k, generator=g).to(torch.bfloat16).float()
        pick = torch.rand(bsz, n, k, generator=g) < 0.02
        w[pick] = specials[torch.randint(0, len(specials), (int(pick.sum()),), generator=g)]
        compiled, emulated = chain_partials(x, w), chain_partials_emulated(x, w)
        assert_same_bits(canonicalize_nan(compiled), canonicalize_nan(emulated))


def test_compiled_chains_keep_subnormals_when_the_thread_flushes_them():
    _require_compiled_chains()
    k = 40
    x = torch.full((1, 1, k), 2.0**-130)
    w = torch.full((1, 2, k), 2.0**-3)
    w[0, 1] = 2.0**10
    want = chain_partials_emulated(x, w)
    if not torch.set_flush_denormal(True):
        pytest.skip("this CPU has no flush-to-zero mode")
    try:
        got = chain_partials(x, w)
    finally:
        torch.set_flush_denormal(False)
    assert_same_bits(got, want)
    assert got[0, 0, 0, 0].item() == k * 2.0**-133 and got[0, 0, 0, 1].item() == k * 2.0**-120


def test_without_a_compiler_the_emulation_is_used(monkeypatch):
    monkeypatch.setenv("CC", "/nonexistent/cc")
    cpu_native.library.cache_clear()
    try:
        assert cpu_native.library() is None
        assert cpu_native.chain_partials(torch.ones(1, 1, 3), torch.ones(1, 2, 3)) is None
        x, w, b = _random_exact_inputs(2, 3, 600, seed=4)
        want = exact_reproducible_matmul(x.float().tolist(), w.float().tolist(), b.float().tolist())
        assert_same_bits(reproducible_matmul_cpu(x, w, b), torch.tensor(want, dtype=torch.float32))
    finally:
        cpu_native.library.cache_clear()


def _random_exact_inputs(m, n, k, seed, wdtype=torch.bfloat16, xdtype=torch.bfloat16):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(m, k, generator=g).to(xdtype)
    w = torch.randn(n, k, generator=g).to(wdtype)
    b = torch.randn(n, generator=g).to(torch.bfloat16)
    return x, w, b


@pytest.mark.parametrize("k", [7, 513, 1100])
def test_emulated_matmul_matches_scalar_exact_model(k, chains):
    # K = 1100: three chunks, the last one 76 long; K = 513: one element in the second chunk.
    x, w, b = _random_exact_inputs(2, 3, k, seed=k)
    got = reproducible_matmul_cpu(x, w, b)
    want = exact_reproducible_matmul(x.float().tolist(), w.float().tolist(), b.float().tolist())
    assert_same_bits(got, torch.tensor(want, dtype=torch.float32))


def test_emulated_matmul_fp16_weights_fp32_activations(chains):
    x, w, _ = _random_exact_inputs(3, 2, 600, seed=5, wdtype=torch.float16, xdtype=torch.float32)
    got = reproducible_matmul_cpu(x, w)
    want = exact_reproducible_matmul(x.tolist(), w.float().tolist(), None)
    assert_same_bits(got, torch.tensor(want, dtype=torch.float32))


def test_subnormal_and_signed_zero_outputs(chains):
    # Products that underflow to -0 in every chunk: the chunk chains are +0 + (-tiny) -> -0, so
    # y = -0 + -0 = -0. Padding the chunk tails must not turn it into +0.
    k = 700
    x = torch.full((1, k), 1e-30, dtype=torch.bfloat16)
    w = torch.full((2, k), -1e-30, dtype=torch.bfloat16)
    w[1] = torch.tensor(2.0**-126, dtype=torch.bfloat16)  # products 1e-30 * 2^-126 underflow to +subnormal or 0
    y = reproducible_matmul_cpu(x, w)
    want = exact_reproducible_matmul(x.float().tolist(), w.float().tolist(), None)
    assert_same_bits(y, torch.tensor(want, dtype=torch.float32))
    assert y[0, 0].item() == 0 and math.copysign(1, y[0, 0].item()) < 0
    # subnormal inputs straight from bf16
    xs = torch.full((1, 40), 2.0**-130, dtype=torch.float32).to(torch.bfloat16)
    ws = torch.full((1, 40), 2.0**10, dtype=torch.bfloat16)
    ys = reproducible_matmul_cpu(xs, ws)
    assert ys.item() == 40 * 2.0**-120


def test_nan_and_inf_outputs_are_canonical(chains):
    x = torch.ones(1, 600, dtype=torch.bfloat16)
    w = torch.ones(3, 600, dtype=torch.bfloat16)
    w[0, 10] = math.inf
    w[1, 10], w[1, 550] = math.inf, -math.inf  # inf in one chunk, -inf in the next: NaN
    w[2, 3] = math.nan
    y = reproducible_matmul_cpu(x, w)
    assert y[0, 0].item() == math.inf
    assert bits(y)[0, 1].item() == CANONICAL_NAN_BITS
    assert bits(y)[0, 2].item() == CANONICAL_NAN_BITS


def test_batch_invariance_of_the_emulation(chains):
    x, w, b = _random_exact_inputs(9, 40, 1030, seed=3)
    full = reproducible_matmul_cpu(x, w, b)
    for i in (0, 4, 8):
        assert_same_bits(full[i : i + 1], reproducible_matmul_cpu(x[i : i + 1], w, b))
    # and a row is independent of which other columns are computed
    assert_same_bits(full[:, 5:17], reproducible_matmul_cpu(x, w[5:17], b[5:17]))


def test_order_is_not_a_plain_fp32_matmul():
    # The emulation must be the specified order, not whatever a BLAS does: they differ.
    x, w, _ = _random_exact_inputs(16, 64, 2048, seed=11)
    ours = reproducible_matmul_cpu(x, w)
    blas = x.float() @ w.float().t()
    assert not torch.equal(bits(ours), bits(blas))
    assert torch.allclose(ours, blas, rtol=1e-4, atol=1e-4)


# --- the configuration table ------------------------------------------------------------------


def test_split_count_depends_on_k_alone():
    assert split_count(1) == 1 and split_count(CHUNK) == 1 and split_count(CHUNK + 1) == 2
    assert split_count(4096) == 8 and split_count(14336) == 28
    assert chunk_bounds(1100) == [(0, 512), (512, 1024), (1024, 1100)]


def test_launch_table_is_a_pure_function_of_shape():
    shapes = [
        (m, n, k)
        for m in (1, 3, 16, 17, 64, 65, 512, 4096)
        for n in (128, 4096, 14336, 128256)
        for k in (7, 4096, 14336)
    ]
    first = [launch_config(*s) for s in shapes]
    assert first == [launch_config(*s) for s in shapes]
    assert launch_config(1, 4096, 4096).kernel == launch_config(1, 4096, 14336).kernel == "gemv_persistent"
    assert launch_config(1, 128256, 4096).kernel == "gemv_persistent"
    assert launch_config(4, 3584, 18944).kernel == launch_config(2, 4096, 4096).kernel == "gemv_persistent"
    assert launch_config(5, 4096, 4096).kernel == "gemv"
    assert launch_config(256, 4096, 14336).split_parallel and not launch_config(512, 4096, 4096).split_parallel
    assert not launch_config(128, 16000, 1 << 20).split_parallel  # its partials would take 16 GiB
    for (m, _, _), cfg in zip(shapes, first):
        assert isinstance(cfg, LaunchConfig)
        if cfg.kernel == "gemv":
            assert m <= 64
        if cfg.kernel == "gemv_persistent":
            assert m <= 4
    assert [m_bucket(m) for m in (1, 16, 17, 64, 65)] == ["decode", "decode", "small", "small", "prefill"]
    for key, cfg in config.TABLE.items():
        assert key[0] in ("decode", "small", "prefill") and cfg.kernel in ("gemv", "gemv_persistent", "tile")


@pytest.mark.parametrize(
    ("capability", "decode", "prefill"),
    [((9, 0), "gemv_persistent", "sgemm"), ((8, 6), "gemv", "sgemm"), ((7, 5), "tile", "tile")],
)
def test_launches_follow_the_gpu_generation(monkeypatch, capability, decode, prefill):
    # The tensor-memory accelerator needs sm_90, cp.async sm_80; older GPUs take the Triton tiles
    # (the same bits: every launch computes the order of config.py).
    from tasks.reproducible import cuda_kernels
    from tasks.reproducible.gemm import effective_config

    monkeypatch.setattr(cuda_kernels, "_capability", lambda index: capability)
    monkeypatch.setattr(cuda_kernels, "_device_limits", lambda index: (132, 227 * 1024))
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    cuda_kernels._persistent_plan.cache_clear()
    try:
        weight = torch.zeros(4096, 4096, dtype=torch.bfloat16)
        assert effective_config(1, weight).kernel == decode
        assert effective_config(16, weight).kernel == ("gemv" if capability >= (8, 0) else "tile")
        assert effective_config(4096, weight).kernel == prefill
        assert cuda_kernels.kernels_run_on(0) == (capability >= (8, 0))
    finally:
        cuda_kernels._persistent_plan.cache_clear()


@pytest.fixture
def h200_plans(monkeypatch):
    """cuda_kernels planning launches for an H200 (sm_90, 132 SMs, 227 KB per program), no GPU
    needed; plans cached under other settings are dropped before and after."""
    from tasks.reproducible import cuda_kernels

    monkeypatch.setattr(cuda_kernels, "_capability", lambda index: (9, 0))
    monkeypatch.setattr(cuda_kernels, "_device_limits", lambda index: (132, 227 * 1024))
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    cuda_kernels._persistent_plan.cache_clear()
    yield cuda_kernels
    cuda_kernels._persistent_plan.cache_clear()


def test_persistent_gemv_keeps_16bit_x_16bit_only_where_fp32_x_leaves_no_room(h200_plans):
    # 227 KB per program (an H200): x's fp32 copy at M = 4 and K = 14336 (Llama's down projection)
    # takes 231 KB, as 16-bit values 116 KB, which leaves three 28 KB weight slots.
    from tasks.reproducible.gemm import effective_config

    plan, bf16 = h200_plans.gemv_persistent_plan, torch.bfloat16
    assert plan(4, 4096, 14336) is None and plan(4, 4096, 14336, x_dtype=torch.float32) is None
    half = plan(4, 4096, 14336, x_dtype=bf16)
    assert half.x_half and half.stages == 3 and half == plan(4, 4096, 14336, x_dtype=torch.float16)
    assert not plan(2, 4096, 14336, x_dtype=bf16).x_half  # fp32 x fits: kept as before
    assert not plan(1, 4096, 4096, x_dtype=bf16).x_half
    assert plan(2, 3584, 18944) is None and plan(2, 3584, 18944, x_dtype=bf16).x_half  # Qwen's down
    assert plan(4, 3584, 18944, x_dtype=bf16) is None  # even 16-bit x leaves one slot there
    assert plan(4, 1024, 14336, x_dtype=bf16) is None  # one group of 8 rows per program
    assert plan(4, 1536, 14336, x_dtype=bf16).x_half  # two groups of 6
    down = torch.zeros(4096, 14336, dtype=bf16)
    assert effective_config(4, down, x_dtype=bf16).kernel == "gemv_persistent"
    assert effective_config(4, down).kernel == effective_config(4, down, x_dtype=torch.float32).kernel == "gemv"


def test_persistent_gemv_has_at_least_as_many_slots_as_stages_in_flight(h200_plans, monkeypatch):
    # The producer waits for the stage PERSISTENT_IN_FLIGHT back to be in; with fewer slots than
    # that, its slot would already hold a later stage and the wait would never return (a hang).
    plan, bf16 = h200_plans.gemv_persistent_plan, torch.bfloat16
    assert plan(4, 4096, 8192).stages == 2 and plan(4, 4096, 14336, x_dtype=bf16).stages == 3
    monkeypatch.setattr(h200_plans, "PERSISTENT_IN_FLIGHT", 3)
    h200_plans._persistent_plan.cache_clear()
    assert plan(4, 4096, 8192) is None and plan(4, 4096, 14336, x_dtype=bf16).stages == 3


def test_sgemm_splits_only_a_short_last_wave():
    # 264 programs at once (132 SMs x 2): the last columns of tiles, enough for the tiles past the
    # last whole wave, are split by chunk when that split wave (ceil(tiles x chunks / 264) / chunks
    # of a wave) is at most 3/4 of one.
    assert config.sgemm_tail_columns(32, 112, 8, 264) == 5  # 4096 x 14336 x 4096: 160 tiles, 5/8
    assert config.sgemm_tail_columns(4, 112, 8, 264) == 46  # 512 x 14336 x 4096: 184 tiles, 6/8
    assert config.sgemm_tail_columns(4, 148, 7, 264) == 16  # 512 x 18944 x 3584: 64 tiles, 2/7
    assert config.sgemm_tail_columns(32, 32, 8, 264) == 0  # 256 tiles split: a whole wave again
    assert config.sgemm_tail_columns(32, 32, 28, 264) == 0  # 28/28
    assert config.sgemm_tail_columns(4, 132, 8, 264) == 0  # whole waves only
    assert config.sgemm_tail_columns(4, 50, 8, 264) == 0  # under one wave: launch_config's split rule
    assert config.sgemm_tail_columns(32, 112, 1, 264) == 0  # one chunk: nothing to split


def test_persistent_gemv_programs_read_each_weight_row_once_where_they_can():
    # A program copies whole groups of rows, so a last group past its own rows reads its
    # neighbour's too: Llama's 4096 rows over 132 programs in groups of 8 read 4224 rows.
    from tasks.reproducible import cuda_kernels as ck

    assert ck.persistent_programs(4096, 14336, 132) == 128  # (N, K): 32 rows each, 4096 read
    assert ck.persistent_programs(14336, 4096, 132) == 128  # 112 rows, 4 groups of 28
    assert ck.persistent_programs(3584, 18944, 132) == 120  # groups of 6: 3960 rows read over 132
    assert ck.persistent_programs(18944, 3584, 132) == 132  # 19008 over 132, the fewest
    assert ck.persistent_programs(7, 4096, 132) == 7
    gen = torch.Generator().manual_seed(5)
    for _ in range(200):
        n = int(torch.randint(1, 200_000, (), generator=gen))
        k = int(torch.randint(1, 40_000, (), generator=gen))
        programs = ck.persistent_programs(n, k, 132)
        read, longest = ck._persistent_rows_read(n, k, programs)
        read_all, longest_all = ck._persistent_rows_read(n, k, min(n, 132))
        assert min(n, 132) * 7 // 8 <= programs <= min(n, 132)
        assert n <= read <= read_all and longest <= longest_all


def test_sgemm_k_major_copy_needs_whole_quads_of_columns():
    # The transpose kernel stores four columns at a time: a column count it cannot fill (or one
    # short of M) is refused before anything is launched.
    from tasks.reproducible import cuda_kernels as ck

    for rows in (10, 4):
        with pytest.raises(ValueError, match="multiple of 4"):
            ck.transpose_to_f32(torch.randn(6, 8), rows)


def test_launch_config_validation():
    with pytest.raises(ValueError):
        LaunchConfig("tile", block_m=24)
    with pytest.raises(ValueError):
        LaunchConfig("tile", block_k=1024)
    with pytest.raises(ValueError):
        LaunchConfig("mma")


# --- the drop-in Linear and the patcher -------------------------------------------------------


def test_reproducible_linear_is_a_drop_in():
    torch.manual_seed(0)
    ref = nn.Linear(96, 48)
    lin = ReproducibleLinear.from_linear(ref)
    x = torch.randn(5, 7, 96)
    y = lin(x)
    assert y.shape == (5, 7, 48) and y.dtype == torch.float32
    want = reproducible_matmul_cpu(x, ref.weight.detach().bfloat16(), ref.bias.detach())
    assert_same_bits(y, want)
    assert torch.allclose(y, ref(x), atol=3e-2)  # bf16 weights: close to the fp32 layer
    assert lin(x.bfloat16()).dtype == torch.bfloat16
    fresh = ReproducibleLinear(96, 48, bias=False)
    assert fresh.weight.dtype == torch.bfloat16 and fresh.bias is None
    with pytest.raises(TypeError):
        ReproducibleLinear(4, 4, dtype=torch.float32)


def test_patch_linear_layers():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Sequential(nn.Linear(64, 64), nn.Linear(64, 8)))
    x = torch.randn(3, 32)
    expected = model(x)
    replaced = patch_linear_layers(model, include=lambda name, m: name != "2.1")
    assert replaced == 2
    assert isinstance(model[0], ReproducibleLinear) and isinstance(model[2][0], ReproducibleLinear)
    assert type(model[2][1]) is nn.Linear
    assert torch.allclose(model(x), expected, atol=5e-2)
    assert torch.equal(bits(model(x)), bits(model(x)))


def test_static_weight_is_claimed_only_while_the_weight_is_the_one_last_read(monkeypatch):
    # A static weight lets the decode GEMV start reading it before the GPU work queued ahead ends,
    # so the layer claims it only when the weight is the tensor its last call read, unwritten since.
    from tasks.reproducible import linear

    claims = []

    def record(x, weight, bias=None, *, static_weight=False):
        claims.append(static_weight)
        return reproducible_matmul(x, weight, bias)

    monkeypatch.setattr(linear, "reproducible_matmul", record)
    layer, x = ReproducibleLinear(8, 4, static_weight=True), torch.randn(2, 8)
    first = layer(x)
    assert torch.equal(bits(layer(x)), bits(first))
    with torch.no_grad():
        layer.weight.mul_(2)  # written in place: the version counter moves
    layer(x)
    layer(x)
    layer.load_state_dict(layer.state_dict())  # copied in place
    layer(x)
    layer.weight = nn.Parameter(layer.weight.detach().clone())  # replaced
    layer(x)
    layer(x)
    assert claims == [False, True, False, True, False, False, True]

    claims.clear()
    plain = ReproducibleLinear(8, 4)
    plain(x), plain(x)
    model = nn.Sequential(nn.Linear(8, 4))
    patch_linear_layers(model, static_weight=True)
    model(x), model(x)
    assert claims == [False, False, False, True]
    with torch.inference_mode():  # inference tensors keep no version counter: never claimed
        frozen = ReproducibleLinear(8, 4, static_weight=True)
        frozen(x), frozen(x)
    assert claims[-2:] == [False, False]


def test_matmul_argument_checks():
    x = torch.randn(2, 8)
    with pytest.raises(TypeError):
        reproducible_matmul(x, torch.randn(4, 8))  # fp32 weights are not the fused-upcast path
    with pytest.raises(ValueError):
        reproducible_matmul(x, torch.randn(4, 9).bfloat16())
    assert reproducible_matmul(torch.randn(0, 8), torch.randn(4, 8).bfloat16()).shape == (0, 4)


def test_backward_raises_instead_of_dropping_gradients():
    layer = ReproducibleLinear(8, 4)  # parameters require grad, as nn.Linear's do
    x = torch.randn(2, 8)
    y = layer(x)
    assert y.requires_grad
    with pytest.raises(RuntimeError, match="forward-only"):
        y.sum().backward()
    with torch.no_grad():
        plain = layer(x)
    assert not plain.requires_grad and torch.equal(bits(plain), bits(y.detach()))
    q = torch.randn(3, 2, 8, requires_grad=True)
    with pytest.raises(RuntimeError, match="forward-only"):
        reproducible_bmm(q, torch.randn(3, 4, 8).bfloat16()).sum().backward()


def test_no_features_give_the_bias():
    # K = 0, like nn.Linear(0, N): no chunks, the empty sum +0.0, then the bias (a -0.0 bias gives
    # +0.0, a NaN bias the canonical NaN).
    bias = torch.tensor([1.5, -0.0, float("nan"), -3.0]).bfloat16()
    y = reproducible_matmul(torch.randn(2, 3, 0), torch.randn(4, 0).bfloat16(), bias)
    assert y.shape == (2, 3, 4) and y.dtype == torch.float32
    assert bits(y[..., 0]).eq(bits(torch.tensor(1.5))).all() and bits(y[..., 1]).eq(0).all()
    assert bits(y[..., 2]).eq(CANONICAL_NAN_BITS).all() and y[..., 3].eq(-3.0).all()
    assert bits(reproducible_matmul(torch.randn(5, 0), torch.randn(4, 0).bfloat16())).eq(0).all()
    assert reproducible_bmm(torch.randn(3, 2, 0), torch.randn(3, 4, 0).bfloat16()).eq(0).all()


# --- deterministic elementwise pieces ---------------------------------------------------------


def test_exp_is_accurate_and_handles_the_range():
    z = torch.linspace(-87, 88, 100001)
    got = repro_exp(z).double()
    want = torch.exp(z.double())
    assert float(((got - want).abs() / want).max()) < 1e-6
    assert repro_exp(torch.tensor([-1000.0])).item() < 1e-37
    assert math.isfinite(repro_exp(torch.tensor([1000.0])).item())


def test_rms_norm_takes_a_correctly_rounded_root():
    """The root is fl32(sqrt(mean + eps)), as an IEEE fp32 square root would give: PyTorch's
    vectorized fp32 sqrt is off by an ulp for many inputs on some CPU builds, which made the
    decode block's CPU digests differ from the GPU's."""
    h = torch.randn(256, 96, generator=torch.Generator().manual_seed(3)) * 3
    g = (torch.rand(96, generator=torch.Generator().manual_seed(4)) + 0.5).bfloat16()
    eps = 1e-5
    mean = repro_row_sum(h * h) / torch.full((1,), 96.0)
    roots = [math.sqrt(v) for v in (mean + eps).flatten().tolist()]  # fp64: exact enough to round once
    rms = torch.tensor(roots, dtype=torch.float64).float().reshape(-1, 1)
    assert torch.equal(bits(repro_rms_norm(h, g, eps)), bits((h / rms) * g.float()))


# --- the problems, at world 2 on the CPU --------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _problem_worker(rank: int, world: int, port: int, out_dir: str):
    import torch.distributed as dist

    from tasks import get, load_reference
    from tasks.reproducible.allreduce import deterministic_all_reduce
    from tasks.spec import InputContext

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    out = {}
    for pid in ("repro_linear", "repro_tp_row_linear", "repro_decode_block"):
        problem = get(pid)
        ref = load_reference(pid)
        dims = problem.shapes[0].dims
        rng = torch.Generator().manual_seed(100 + rank)
        shared = torch.Generator().manual_seed(7)
        ctx = InputContext(rank, world, dims, torch.bfloat16, torch.device("cpu"), rng, shared)
        inputs = ref.make_inputs(ctx)
        y1 = ref.solution(*inputs)
        y2 = ref.solution(*inputs)
        out[pid] = (y1, y2, inputs)
    # The all-reduce alone: rank order, bitwise.
    p = torch.randn(3, 5, generator=torch.Generator().manual_seed(rank)) * 1e3
    out["allreduce"] = (deterministic_all_reduce(p), p)
    torch.save(out, os.path.join(out_dir, f"rank{rank}.pt"))
    dist.destroy_process_group()


@pytest.fixture(scope="module")
def world2_results(tmp_path_factory):
    out_dir = str(tmp_path_factory.mktemp("repro_world2"))
    # fork: the children inherit the imported modules (a spawned child re-imports torch, seconds
    # each on a busy 2-core machine); they use one intra-op thread, so no OpenMP pool crosses the fork.
    ctx = mp.get_context("fork")
    port = _free_port()
    procs = [ctx.Process(target=_problem_worker, args=(r, 2, port, out_dir)) for r in range(2)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(120)
    assert all(proc.exitcode == 0 for proc in procs), [proc.exitcode for proc in procs]
    return {r: torch.load(os.path.join(out_dir, f"rank{r}.pt")) for r in range(2)}


@pytest.mark.parametrize("pid", ["repro_linear", "repro_tp_row_linear", "repro_decode_block"])
def test_problem_reference_is_deterministic(world2_results, pid):
    for rank in (0, 1):
        y1, y2, _ = world2_results[rank][pid]
        assert y1.dtype == torch.float32 and torch.isfinite(y1).all()
        assert torch.equal(bits(y1), bits(y2))


@pytest.mark.parametrize("pid", ["repro_tp_row_linear", "repro_decode_block"])
def test_row_parallel_outputs_agree_across_ranks(world2_results, pid):
    assert torch.equal(bits(world2_results[0][pid][0]), bits(world2_results[1][pid][0]))


def test_tp_row_linear_is_the_rank_ordered_sum(world2_results):
    parts = []
    for rank in (0, 1):
        x, w, b = world2_results[rank]["repro_tp_row_linear"][2]
        parts.append(reproducible_matmul_cpu(x, w))
    expected = (parts[0] + parts[1]) + b.float()
    assert_same_bits(world2_results[0]["repro_tp_row_linear"][0], expected)
    # the same layer computed with K unsplit is close, not equal: the order depends on world size
    x_full = torch.cat([world2_results[r]["repro_tp_row_linear"][2][0] for r in (0, 1)], dim=1)
    w_full = torch.cat([world2_results[r]["repro_tp_row_linear"][2][1] for r in (0, 1)], dim=1)
    single = reproducible_matmul_cpu(x_full, w_full, b)
    assert torch.allclose(single, expected, atol=1e-4)


def test_column_parallel_linear_matches_the_emulation(world2_results):
    for rank in (0, 1):
        x, w, b = world2_results[rank]["repro_linear"][2]
        assert_same_bits(world2_results[rank]["repro_linear"][0], reproducible_matmul_cpu(x, w, b))


def test_gather_all_reduce_is_rank_ordered(world2_results):
    (out0, p0), (out1, p1) = world2_results[0]["allreduce"], world2_results[1]["allreduce"]
    assert_same_bits(out0, p0 + p1)
    assert_same_bits(out1, p0 + p1)


def test_decode_block_matches_a_float64_model(world2_results):
    """The block computes what it says: compare with a float64 evaluation of the same maths."""
    ins = [world2_results[r]["repro_decode_block"][2] for r in (0, 1)]
    got = world2_results[0]["repro_decode_block"][0].double()
    h, cos, sin, g1, g2 = (t.double() for t in ins[0][:5])

    def norm(v, g):
        return v / torch.sqrt((v * v).mean(-1, keepdim=True) + 1e-5) * g

    def rot(v):
        half = v.shape[-1] // 2
        c, s = cos[:, None, :], sin[:, None, :]
        return torch.cat([v[..., :half] * c - v[..., half:] * s, v[..., half:] * c + v[..., :half] * s], -1)

    x = norm(h, g1)
    attn_out = 0
    for r in (0, 1):
        _, _, _, _, _, wqkv, wo, _, _, kc, vct = (t.double() for t in ins[r])
        nkv, _, dh = kc.shape[1:]
        nq = wo.shape[1] // dh
        qkv = x @ wqkv.t()
        q = rot(qkv[:, : nq * dh].reshape(-1, nq, dh))
        k = rot(qkv[:, nq * dh : (nq + nkv) * dh].reshape(-1, nkv, dh)).bfloat16().double()
        v = qkv[:, (nq + nkv) * dh :].reshape(-1, nkv, dh).bfloat16().double()
        keys = torch.cat([kc, k[:, :, None, :]], 2)
        vals = torch.cat([vct, v[:, :, :, None]], 3)
        grp = nq // nkv
        s = torch.einsum("bhd,bhtd->bht", q, keys.repeat_interleave(grp, 1)) / math.sqrt(dh)
        o = torch.einsum("bht,bhdt->bhd", torch.softmax(s, -1), vals.repeat_interleave(grp, 1))
        attn_out = attn_out + o.reshape(o.shape[0], -1) @ wo.t()
    h1 = h + attn_out
    x2 = norm(h1, g2)
    mlp = 0
    for r in (0, 1):
        wgu, wd = ins[r][7].double(), ins[r][8].double()
        f = wd.shape[1]
        gu = x2 @ wgu.t()
        mlp = mlp + (torch.nn.functional.silu(gu[:, :f]) * gu[:, f:]) @ wd.t()
    want = h1 + mlp
    assert float((got - want).abs().max()) < 1e-3 * float(want.abs().max())


def test_tiny_shapes_are_first():
    from tasks import get

    for pid in ("repro_linear", "repro_tp_row_linear", "repro_decode_block"):
        problem = get(pid)
        assert problem.bitwise
        first = problem.shapes[0].dims
        assert all(v <= 256 for v in first.values())


def test_launchers_pass_as_many_parameters_as_each_kernel_takes():
    # The driver reads parameters blindly: a count that disagrees with the signature launches
    # with garbage. Parse each kernel family's signature in the source.
    import re

    from tasks.reproducible import cuda_kernels

    for family, count in cuda_kernels._NPARAMS.items():
        name = family.rstrip("<")
        match = re.search(rf"\b{name}\(([^)]*)\)", cuda_kernels.SOURCE)
        assert match, name
        assert match.group(1).count(",") + 1 == count, (name, match.group(1))


def test_programmatic_launch_structs_match_the_drivers_layout():
    # cuLaunchKernelEx reads these blindly: CUlaunchConfig's fields and CUlaunchAttribute's value
    # at cuda.h's offsets on a 64-bit host, or the launch goes out with garbage.
    import ctypes

    from tasks.reproducible import cuda_rtc

    cfg, attr = cuda_rtc._LaunchConfig, cuda_rtc._LaunchAttribute
    offsets = {name: getattr(cfg, name).offset for name in ("grid", "block", "smem", "stream", "attrs", "nattrs")}
    assert offsets == {"grid": 0, "block": 12, "smem": 24, "stream": 32, "attrs": 40, "nattrs": 48}
    assert ctypes.sizeof(cfg) == 56
    assert (attr.id.offset, attr.value.offset, ctypes.sizeof(attr)) == (0, 8, 72)


def test_persistent_gemv_refuses_more_rows_than_it_holds():
    from tasks.reproducible import cuda_kernels

    with pytest.raises(ValueError, match="at most 4 rows"):
        cuda_kernels.gemv_persistent(torch.zeros(5, 64), torch.zeros(32, 64, dtype=torch.bfloat16), None)


# --- PTX audit without a GPU: Triton compiles for sm_90 on any machine ---------------------------


def test_triton_kernels_compile_to_fp32_fma_chains():
    triton = pytest.importorskip("triton")
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from tasks.reproducible.triton_gemm import kernels

    tile, _ = kernels()
    sig = {name: "i32" for name in ("M", "N", "K", "num_chunks", "stride_xm", "stride_xk", "stride_wn", "stride_wk",
                                    "stride_os", "stride_om")}  # fmt: skip
    sig.update({"x_ptr": "*bf16", "w_ptr": "*bf16", "b_ptr": "*fp32", "out_ptr": "*fp32"})
    for split, block in ((False, (128, 128, 16)), (True, (16, 64, 32))):
        consts = {"HAS_BIAS": True, "SPLIT_PARALLEL": split, "CHUNK_LEN": CHUNK}
        consts.update(dict(zip(("BLOCK_M", "BLOCK_N", "BLOCK_K"), block)))
        sig.update({k: "constexpr" for k in consts})
        compiled = triton.compile(
            ASTSource(tile, dict(sig), consts),
            target=GPUTarget("cuda", 90, 32),
            options={"num_warps": 4, "num_stages": 3, "enable_fp_fusion": True},
        )
        ptx = compiled.asm["ptx"]
        # one fma.rn.f32 per (output, k) of a BLOCK_K step, for this thread's outputs
        assert ptx.count("fma.rn.f32") >= block[0] * block[1] * block[2] // 128
        assert not re.search(r"\b(?:w?mma|hmma)\b|\.tf32|wgmma", ptx)
        assert not [line for line in ptx.splitlines() if ".ftz" in line and ".f32" in line]
