"""Blocked FP8 dequantization (fp32 result = fp8 value * its block's scale) followed by an
all-to-all of the dequantized chunks.

Roofline, per rank y: W x M x N float8_e4m3fn and s: W x (M*N/128) fp32 (chunk j addressed to
rank j); n = M*N values per chunk, W ranks. One phase.
- FLOPs: one product per value: W*n per GPU, fp32 on CUDA cores.
- NVLink: send each peer its chunk still quantized and dequantize on arrival:
  (W-1) * (n + 4 * n/128) bytes per GPU, about a quarter of moving the fp32 result.
- HBM: read y and s, write the W*n fp32 result: W * (n + 4*n/128 + 4n).
"""

from tasks.spec import Phase, Problem, Shape, Tolerance, dtype_bytes

BLOCK = 128


def roofline(dims, world_size, dtype):
    n = dims["M"] * dims["N"]
    w = world_size
    f32 = dtype_bytes("float32")
    quantized = n * 1 + (n // BLOCK) * f32
    return [
        Phase(
            "all-to-all + dequantize",
            flops=w * n,
            hbm_bytes=w * (quantized + n * f32),
            comm_bytes=(w - 1) * quantized,
            unit="fp32",
        )
    ]


PROBLEM = Problem(
    id="blocked_fp8_dequantize",
    pkb_id=20,
    title="Blocked FP8 dequantize + all-to-all",
    level=2,
    parallelism="EP",
    origin="DeepSeek-V3 / DeepEP",
    description=(
        "Every rank holds local_y (W x M x N, float8_e4m3fn), local_s (W x M*N/128, float32: one scale "
        "per 128 consecutive values of the flattened local_y) and block_size = 128. Dequantize, "
        "x = float(y) * s in fp32, and all-to-all the chunks: return a (W, M, N) float32 tensor whose "
        "slice j is rank j's dequantized chunk addressed to this rank. The receive side of an FP8 "
        "expert-parallel dispatch; sending the quantized bytes and dequantizing on arrival cuts the "
        "traffic about fourfold. NVLink-bound at large sizes. (The public suite feeds bf16 values and "
        "scales here; this suite uses real float8 values and fp32 scales.)"
    ),
    shapes=(
        Shape("small", {"M": 16, "N": 256}),
        Shape("default", {"M": 1024, "N": 1024}, default=True),
        Shape("large", {"M": 4096, "N": 8192}),
    ),
    roofline=roofline,
    tolerance=Tolerance(
        atol=0.0,
        rtol=1e-6,
        reason=(
            "one fp32 rounding of an exact product: measured 2^-24 relative from fp64 at W=4 on the default "
            "shape; any fp32 multiply gives the same bits, a bf16 detour does not"
        ),
    ),
)
