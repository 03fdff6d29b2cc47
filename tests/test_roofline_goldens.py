"""Rooflines against hand calculations for the problems whose other tests check only their totals
(tests/test_problems_collectives_tp.py: summed phases against brute-force counts at tiny shapes)
or nothing at all (the reproducible-GEMM track).

One shape each, the default, at W = 4 ranks in bf16 (e = 2 bytes per element); the arithmetic is
restated from each problem's docstring. Every phase's name, FLOPs, HBM bytes, NVLink bytes and
unit are checked, then T_roof and the resource that bounds it on the H100 SXM profile, with the
term that dominates each phase picked by hand (times in the comments).
"""

from __future__ import annotations

import math

import pytest

import tasks
from evaluator.roofline import profile, roofline
from tasks.spec import Phase

W = 4
E = 2  # bytes per bf16 element
F32 = 4  # bytes per fp32 value

# The H100 SXM profile (evaluator/hardware.toml): peaks in FLOP/s, bandwidths in bytes/s.
BF16_TC = 989e12
FP32 = 67e12
HBM = 3.35e12
NVLINK = 450e9


def test_h100_profile_is_the_one_used_below():
    h100 = profile("h100")
    assert (h100.peak_flops("bf16_tc"), h100.peak_flops("fp32")) == (BF16_TC, FP32)
    assert (h100.hbm_bytes_per_s, h100.nvlink_bytes_per_s) == (HBM, NVLINK)


def check(pid: str, dims: dict, want: list[Phase], t_roof: float, bound: str, world: int = W) -> None:
    """`pid`'s default shape is `dims`; its phases there are `want`, field by field; on the H100
    its T_roof is `t_roof` seconds, bound by `bound`."""
    problem = tasks.get(pid)
    assert dict(problem.default_shape.dims) == dims
    got = problem.phases(dims, world)
    assert [ph.name for ph in got] == [ph.name for ph in want]
    for g, w in zip(got, want, strict=True):
        assert g.unit == w.unit, g.name
        for field in ("flops", "hbm_bytes", "comm_bytes"):
            assert getattr(g, field) == pytest.approx(getattr(w, field), rel=1e-12, abs=0), f"{g.name}: {field}"
    r = roofline(got, profile("h100"))
    assert r.t_roof_s == pytest.approx(t_roof, rel=1e-12)
    assert r.bound.value == bound


# ---------------------------------------------------------------------------------------------
# Collectives: M x N = 1024 x 1024 bf16 per rank (or per slice), B = 2 MiB.
# ---------------------------------------------------------------------------------------------

M, N = 1024, 1024
B = M * N * E
assert B == 2_097_152


def test_allreduce():
    flops = (W - 1) / W * M * N  # 786_432 fp32 adds
    hbm = 2 * B  # read input, write output
    comm = 2 * (W - 1) / W * B  # reduce-scatter + all-gather: 3_145_728
    # compute 0.012 us, HBM 1.25 us, NVLink 6.99 us
    check("allreduce", {"M": M, "N": N}, [Phase("allreduce", flops, hbm, comm, "fp32")], comm / NVLINK, "nvlink")
    assert comm / NVLINK * 1e6 == pytest.approx(6.99, abs=0.01)


def test_allgather():
    hbm = B + W * B  # read the shard, write the (W, M, N) stack: 10_485_760
    comm = (W - 1) * B  # the shard to each peer: 6_291_456
    # HBM 3.13 us, NVLink 13.98 us
    check("allgather", {"M": M, "N": N}, [Phase("allgather", 0, hbm, comm, "fp32")], comm / NVLINK, "nvlink")


def test_broadcast():
    hbm = 2 * B  # the root reads its tensor and writes its output copy
    comm = B  # every byte leaves the root once
    # HBM 1.25 us, NVLink 4.66 us
    check("broadcast", {"M": M, "N": N}, [Phase("broadcast", 0, hbm, comm, "fp32")], comm / NVLINK, "nvlink")


def test_reduce():
    flops = (W - 1) / W * M * N
    hbm = 2 * B
    comm = B  # the root receives one value per element
    check("reduce", {"M": M, "N": N}, [Phase("reduce", flops, hbm, comm, "fp32")], comm / NVLINK, "nvlink")


def test_scatter():
    hbm = (W + 1) * B  # the root reads W slices and writes its own: 10_485_760
    comm = (W - 1) * B  # the root sends W-1 slices
    check("scatter", {"M": M, "N": N}, [Phase("scatter", 0, hbm, comm, "fp32")], comm / NVLINK, "nvlink")


def test_gather():
    hbm = (W + 1) * B  # the root reads its tensor and writes the W*B stack
    comm = (W - 1) * B  # the root receives W-1 tensors: 6_291_456
    # HBM 3.13 us, NVLink 13.98 us
    check("gather", {"M": M, "N": N}, [Phase("gather", 0, hbm, comm, "fp32")], comm / NVLINK, "nvlink")


def test_reducescatter():
    flops = (W - 1) * M * N  # W-1 adds per output element: 3_145_728
    hbm = (W + 1) * B  # read the (W*M, N) input, write the M x N block
    comm = (W - 1) * B  # one partial per output element from each peer
    # compute 0.047 us, HBM 3.13 us, NVLink 13.98 us
    check(
        "reducescatter", {"M": M, "N": N}, [Phase("reducescatter", flops, hbm, comm, "fp32")], comm / NVLINK, "nvlink"
    )


def test_alltoall():
    hbm = 2 * W * B  # read the (W, M, N) input, write the (W, M, N) output: 16_777_216
    comm = (W - 1) * B  # the slices for the peers
    # HBM 5.01 us, NVLink 13.98 us
    check("alltoall", {"M": M, "N": N}, [Phase("alltoall", 0, hbm, comm, "fp32")], comm / NVLINK, "nvlink")


# ---------------------------------------------------------------------------------------------
# Tensor-parallel and fused problems.
# ---------------------------------------------------------------------------------------------


def test_layernorm_backward():
    rows, h = 1024, 1024
    # B*H products, two column sums of B-1 adds per column, the all-reduce's adds of 2H values
    flops = rows * h + 2 * (rows - 1) * h + 2 * (W - 1) / W * h  # 3_145_216
    hbm = 2 * rows * h * E + 2 * h * E  # read X_hat and dY, write d_gamma and d_beta: 4_198_400
    comm = 2 * (W - 1) / W * 2 * h * E  # all-reduce of the 2H gradient values: 6_144
    # compute 0.047 us, HBM 1.25 us, NVLink 0.014 us
    check(
        "layernorm_backward",
        {"B": rows, "H": h},
        [Phase("column sums + allreduce", flops, hbm, comm, "fp32")],
        hbm / HBM,
        "hbm",
    )


def test_embedding_lookup():
    v, d, t = 1024, 1024, 1024
    # Uniform indices over the W*V rows: a given row is among T draws with probability
    # 1 - (1 - 1/(W*V))^T; rows needed twice travel (and are read) once.
    miss = 1 - 1 / (W * v)
    remote_rows = (W - 1) * v * (1 - miss**t)  # rows on the 3 other shards
    served_rows = v * (1 - miss ** (W * t))  # local rows any rank asked for
    # (1 - 1/4096)^1024 is about e^(-1/4): 3072 * 0.221 = 680 and 1024 * (1 - e^-1) = 647 rows
    assert remote_rows == pytest.approx(3 * 1024 * (1 - math.exp(-0.25)), rel=1e-3)
    assert served_rows == pytest.approx(1024 * (1 - math.exp(-1)), rel=1e-3)
    hbm = t * 8 + served_rows * d * E + t * d * E  # int64 indices, served rows, T output rows
    comm = remote_rows * d * E  # about 1.39 MB
    # HBM 1.03 us, NVLink 3.09 us
    check(
        "embedding_lookup", {"V": v, "D": d, "T": t}, [Phase("lookup", 0, hbm, comm, "fp32")], comm / NVLINK, "nvlink"
    )


GEMM_DIMS = {"M": 1024, "N": 1024, "K": 512}
GM, GN, GK = GEMM_DIMS["M"], GEMM_DIMS["N"], GEMM_DIMS["K"]


@pytest.mark.parametrize("pid", ["allgather_gemm", "allgather_gemm_AT"])
def test_allgather_gemm(pid):
    # A_r: M x K/W, B: K x N on every rank; the AT variant computes the same product.
    flops = 2 * GM * GN * GK  # the whole M x N x K product on every rank: 1_073_741_824
    hbm = (GM * GK / W + GK * GN + GM * GN) * E  # read A_r and B, write C: 3_407_872
    comm = (W - 1) * GM * (GK / W) * E  # the other ranks' slices of A: 786_432
    # compute 1.086 us, HBM 1.017 us, NVLink 1.748 us
    check(pid, GEMM_DIMS, [Phase("allgather + gemm", flops, hbm, comm, "bf16_tc")], comm / NVLINK, "nvlink")
    assert flops / BF16_TC < comm / NVLINK and hbm / HBM < comm / NVLINK


def test_gemm_allreduce():
    flops = 2 * GM * GN * GK  # A_r: M x K, B_r: K x N
    hbm = (GM * GK + GK * GN + GM * GN) * E  # 4_194_304
    comm = 2 * (W - 1) / W * GM * GN * E  # all-reduce of the M x N partial products: 3_145_728
    # compute 1.086 us, HBM 1.25 us, NVLink 6.99 us
    check(
        "gemm_allreduce", GEMM_DIMS, [Phase("gemm + allreduce", flops, hbm, comm, "bf16_tc")], comm / NVLINK, "nvlink"
    )


def test_gemm_allgather():
    flops = 2 * GM * GK * GN / W  # A_r: M x K, B_r: K x N/W: 268_435_456
    hbm = (GM * GK + GK * GN / W + GM * GN) * E  # write the whole gathered C: 3_407_872
    comm = (W - 1) * GM * (GN / W) * E  # the other column blocks of C: 1_572_864
    # compute 0.27 us, HBM 1.017 us, NVLink 3.50 us
    check(
        "gemm_allgather", GEMM_DIMS, [Phase("gemm + allgather", flops, hbm, comm, "bf16_tc")], comm / NVLINK, "nvlink"
    )


def test_gemm_reducescatter():
    flops = 2 * GM * GN * GK / W  # A_r: M x K/W, B_r: K/W x N: 268_435_456
    hbm = (GM * GK / W + GK * GN / W + GM * GN / W) * E  # write the M/W x N block: 1_048_576
    comm = (W - 1) / W * GM * GN * E  # one partial per element owned elsewhere: 1_572_864
    # compute 0.27 us, HBM 0.31 us, NVLink 3.50 us
    check(
        "gemm_reducescatter",
        GEMM_DIMS,
        [Phase("gemm + reducescatter", flops, hbm, comm, "bf16_tc")],
        comm / NVLINK,
        "nvlink",
    )


def test_combined_sharded_gemms():
    m, h, f = 1024, 256, 512
    ml, hl = m / W, h / W  # 256 rows of output, 64 columns of input per rank
    flops = 2 * ml * h * f + 2 * ml * f * h  # x[rows_r] @ W1, then @ W2: 134_217_728
    hbm = (m * hl + 2 * h * f + ml * h) * E  # read x_r, W1, W2; write y_r: 786_432
    comm = (W - 1) * ml * hl * E  # an Ml x Hl block to each peer: 98_304
    # compute 0.136 us, HBM 0.235 us, NVLink 0.218 us
    check(
        "combined_sharded_gemms",
        {"M": m, "H": h, "F": f},
        [Phase("row exchange + mlp", flops, hbm, comm, "bf16_tc")],
        hbm / HBM,
        "hbm",
    )
    assert comm / NVLINK < hbm / HBM


def test_rope_allgather():
    b, s, h, d = 16, 4, 8, 64
    n = b * s * h * d  # 32_768 elements of q (and of k) per rank
    flops = 3 * n + 3 * n  # two products and a sum per element of q and of k
    hbm = (2 * n + 2 * b * s * d + 2 * W * n) * E  # read q, k, cos, sin; write both gathered: 671_744
    comm = (W - 1) * 2 * n * E  # rotated q and k to each peer: 393_216
    # HBM 0.20 us, NVLink 0.87 us
    check(
        "rope_allgather",
        {"B": b, "S": s, "H": h, "D": d},
        [Phase("rope + allgather", flops, hbm, comm, "fp32")],
        comm / NVLINK,
        "nvlink",
    )


def test_tp_rms_norm():
    m, n = 1024, 1024
    flops = (2 + 2) * m * n  # square + add for the statistic, two products to normalize and weight
    hbm = (2 * m * n + n) * E  # read x and the weight, write the output: 4_196_352
    comm = 2 * (W - 1) / W * m * F32  # all-reduce of M fp32 sums: 6_144
    # compute 0.063 us, HBM 1.25 us, NVLink 0.014 us
    check(
        "tp_rms_norm",
        {"M": m, "N": n},
        [Phase("sum of squares + allreduce + normalize", flops, hbm, comm, "fp32")],
        hbm / HBM,
        "hbm",
    )


def test_blocked_fp8_quantize():
    n = 1024 * 1024
    quantized = n * 1 + n // 128 * F32  # fp8 codes and one fp32 scale per 128 values: 1_081_344
    flops = 3 * n  # absolute value, max, division
    hbm = n * E + W * quantized  # read x, write the gathered codes and scales: 6_422_528
    comm = (W - 1) * quantized  # 3_244_032
    # HBM 1.92 us, NVLink 7.21 us
    check(
        "blocked_fp8_quantize",
        {"M": 1024, "N": 1024},
        [Phase("quantize + allgather", flops, hbm, comm, "fp32")],
        comm / NVLINK,
        "nvlink",
    )


def test_blocked_fp8_dequantize():
    n = 1024 * 1024  # values per chunk, W chunks per rank
    quantized = n * 1 + n // 128 * F32
    flops = W * n  # one product per value
    hbm = W * (quantized + n * F32)  # read codes and scales, write the fp32 result: 21_102_592
    comm = (W - 1) * quantized  # chunks travel quantized: 3_244_032
    # HBM 6.30 us, NVLink 7.21 us
    check(
        "blocked_fp8_dequantize",
        {"M": 1024, "N": 1024},
        [Phase("all-to-all + dequantize", flops, hbm, comm, "fp32")],
        comm / NVLINK,
        "nvlink",
    )
    assert hbm / HBM < comm / NVLINK


def test_reducescatter_fused_rmsnorm():
    r, h = 256, 128
    n = r * h  # 32_768 output elements per rank
    flops = (W - 1) * n + n + 2 * n + 2 * n  # reduction adds, division by W, sum of squares, scaling
    hbm = ((W + 1) * n + h) * E  # read the W*R*H input and gamma, write R x H: 327_936
    comm = (W - 1) * n * E  # 196_608
    # compute 0.004 us, HBM 0.098 us, NVLink 0.437 us
    check(
        "reducescatter_fused_rmsnorm",
        {"R": r, "H": h},
        [Phase("reducescatter + rmsnorm", flops, hbm, comm, "fp32")],
        comm / NVLINK,
        "nvlink",
    )


def test_gemv_decode():
    t, h, v = 1, 1024, 1024
    flops = 2 * t * h * v
    hbm = (v * h + t * h + v + W * t * v) * E  # weight shard, hidden, bias; T x W*V logits: 2_109_440
    comm = (W - 1) * t * v * E  # 6_144
    # compute 0.002 us, HBM 0.63 us, NVLink 0.014 us
    check(
        "gemv_decode",
        {"T": t, "H": h, "V": v},
        [Phase("gemv + allgather", flops, hbm, comm, "bf16_tc")],
        hbm / HBM,
        "hbm",
    )


# ---------------------------------------------------------------------------------------------
# Reproducible-GEMM track: fp32 FMA chains on CUDA cores, bf16 weights, fp32 results.
# ---------------------------------------------------------------------------------------------


def test_repro_linear():
    m, n_all, k = 16, 14336, 4096
    n = n_all // W  # 3584 weight rows per rank
    flops = 2 * m * n * k  # 469_762_048
    hbm = n * k * 2 + m * k * 2 + m * n * F32 + n * 2  # weight, x, fp32 output, bias: 29_727_744
    # compute 7.01 us, HBM 8.87 us: streaming the weight bounds the decode shape
    check("repro_linear", {"M": m, "N": n_all, "K": k}, [Phase("linear", flops, hbm, 0, "fp32")], hbm / HBM, "hbm")
    assert flops / FP32 < hbm / HBM


def test_repro_tp_row_linear():
    m, n, k_all = 16, 4096, 14336
    k = k_all // W  # 3584 columns of x and of the weight per rank
    out = m * n * F32  # the fp32 partial and the result: 262_144 bytes
    gemm_flops = 2 * m * n * k  # 469_762_048
    gemm_hbm = n * k * 2 + m * k * 2 + out  # weight, x, partial written: 29_736_960
    ar_flops = (W - 1) / W * m * n  # a reduce-scatter's adds, in rank order: 49_152
    ar_hbm = 2 * out + n * 2  # partial read, output written, bias read: 532_480
    ar_comm = 2 * (W - 1) / W * out  # 393_216
    # gemm: compute 7.01 us, HBM 8.88 us; allreduce: HBM 0.16 us, NVLink 0.87 us
    check(
        "repro_tp_row_linear",
        {"M": m, "N": n, "K": k_all},
        [Phase("gemm", gemm_flops, gemm_hbm, 0, "fp32"), Phase("allreduce", ar_flops, ar_hbm, ar_comm, "fp32")],
        gemm_hbm / HBM + ar_comm / NVLINK,
        "hbm",
    )


def test_repro_decode_block():
    b, d, h, kvh, f_all, t = 8, 2048, 16, 8, 5632, 512
    dh = d // h  # 128
    nq, nkv, f = h // W, kvh // W, f_all // W  # 4 query heads, 2 kv heads, 1408 MLP columns per rank
    comm = 2 * (W - 1) / W * b * d * F32  # each all-reduce of the fp32 [B, D]: 98_304
    # q, k, v projections; scores and values over T+1 positions; output projection
    attn_flops = 2 * b * d * (nq + 2 * nkv) * dh + 2 * 2 * b * nq * (t + 1) * dh + 2 * b * nq * dh * d  # 58_736_640
    # Wq, Wk, Wv and Wo in bf16; the K and V caches in bf16
    attn_hbm = d * (nq + 2 * nkv + nq) * dh * 2 + 2 * b * nkv * t * dh * 2  # 6_291_456 + 4_194_304
    mlp_flops = 2 * b * d * 3 * f  # gate, up and down: 138_412_032
    mlp_hbm = 3 * d * f * 2  # 17_301_504
    # attention: compute 0.88 us, HBM 3.13 us, NVLink 0.22 us; mlp: compute 2.07 us, HBM 5.16 us
    check(
        "repro_decode_block",
        {"B": b, "D": d, "H": h, "KVH": kvh, "F": f_all, "T": t},
        [Phase("attention", attn_flops, attn_hbm, comm, "fp32"), Phase("mlp", mlp_flops, mlp_hbm, comm, "fp32")],
        attn_hbm / HBM + mlp_hbm / HBM,
        "hbm",
    )
    assert attn_hbm + mlp_hbm == 27_787_264
