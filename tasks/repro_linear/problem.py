"""Reproducible fused-upcast linear layer, column-parallel, checked bit for bit.

Every rank holds the same activations x [M, K] (bf16) and its own N/W rows of the weight
[N/W, K] (bf16) and of the bias (bf16); it returns y = x @ W_r.T + b_r as fp32 [M, N/W]. The
result must equal the reference's bits, so the reduction order is part of the problem:

    for each output and each chunk s of 512 k (the last one shorter), in order:
        p_s = +0.0; p_s = fma(x[m, k], w[n, k], p_s) for k ascending   (IEEE fp32 FMA)
    y = p_0 + p_1 + ... (fp32 adds, chunk order), then y = y + b[n]; NaN stored as 0x7FC00000

Weights stay 16-bit in memory and are upcast in registers; tensor cores (mma, wgmma, TF32) are
not IEEE and cannot be used.

Roofline, per rank, one phase, n = N/W:
- FLOPs: 2*M*n*K on fp32 CUDA cores (the fp32 peak: tensor cores are excluded).
- HBM: weight n*K*2 + activations M*K*2 + output M*n*4 + bias n*2 bytes.
- No communication.
"""

from dataclasses import replace

from tasks.spec import BITWISE, Phase, Problem, Shape

BITWISE_ORDER = replace(
    BITWISE, reason="the reduction order is specified, so every correct solution gives the same bits"
)


def roofline(dims, world_size, dtype):
    m, k = dims["M"], dims["K"]
    n = dims["N"] // world_size
    return [Phase("linear", flops=2.0 * m * n * k, hbm_bytes=n * k * 2 + m * k * 2 + m * n * 4 + n * 2, unit="fp32")]


PROBLEM = Problem(
    id="repro_linear",
    title="Reproducible fused-upcast linear (column-parallel)",
    level=2,
    parallelism="TP",
    origin="Reproducible GEMM track: fixed-order fused-upcast kernels",
    description=(
        "A column-parallel linear layer whose output must be bitwise identical to the reference on any "
        "GPU: bf16 weights upcast to fp32 in registers, fp32 FMA chains over k in a fixed order (chunks "
        "of 512 combined in index order), no tensor cores. Decode shapes are bound by streaming the "
        "weights, prefill by fp32 FMA throughput."
    ),
    shapes=(
        Shape("tiny", {"M": 4, "N": 64, "K": 200}),
        Shape("decode", {"M": 16, "N": 14336, "K": 4096}, default=True),
        Shape("lm_head", {"M": 1, "N": 128256, "K": 4096}),
        Shape("prefill", {"M": 2048, "N": 14336, "K": 4096}),
    ),
    roofline=roofline,
    tolerance=BITWISE_ORDER,
    tags=("reproducible", "gemm"),
)
