"""Reproducible row-parallel linear layer with a deterministic all-reduce, checked bit for bit.

Rank r holds its slice of the activations x_r [M, K/W] (bf16), of the weight W_r [N, K/W]
(bf16), and the whole bias [N] (bf16). Every rank returns the same fp32 [M, N]:

    p_r = x_r @ W_r.T in the reproducible order (chunks of 512 k, fp32 FMA chains, chunk partials
          added in index order; see repro_linear), on each rank
    y   = ((p_0 + p_1) + p_2) + ... + p_{W-1}   fp32 adds in rank order
    y   = y + b; NaN stored as 0x7FC00000

so the layer is bitwise reproducible for a given world size on any GPU. A ring or tree
all-reduce adds in another order and fails.

Roofline, per rank, two phases, k = K/W:
- gemm: FLOPs 2*M*N*k on fp32 CUDA cores; HBM weight N*k*2 + x M*k*2 + partial M*N*4 bytes.
- allreduce: NVLink 2(W-1)/W * M*N*4 bytes (a bandwidth-optimal all-reduce; without NVLink
  multicast none sends less); HBM partial read + output write 2*M*N*4 + bias N*2 bytes;
  (W-1)/W * M*N fp32 adds. The rank order does not force every rank to add all W partials: in
  a reduce-scatter each rank adds its 1/W of the elements in rank order, and the all-gather
  that follows copies the sums, so the same bits cost each GPU (W-1)/W * M*N adds.
"""

from tasks.repro_linear.problem import BITWISE_ORDER
from tasks.spec import Phase, Problem, Shape


def roofline(dims, world_size, dtype):
    m, n, w = dims["M"], dims["N"], world_size
    k = dims["K"] // w
    out = m * n * 4
    return [
        Phase("gemm", flops=2.0 * m * n * k, hbm_bytes=n * k * 2 + m * k * 2 + out, unit="fp32"),
        Phase(
            "allreduce", flops=(w - 1) / w * m * n, hbm_bytes=2 * out + n * 2, comm_bytes=2 * (w - 1) / w * out, unit="fp32"
        ),
    ]


PROBLEM = Problem(
    id="repro_tp_row_linear",
    title="Reproducible row-parallel linear + deterministic all-reduce",
    level=2,
    parallelism="TP",
    origin="Reproducible GEMM track: fixed-order fused-upcast kernels",
    description=(
        "The second linear layer of a tensor-parallel MLP: each rank multiplies its K slice in the "
        "reproducible order, then the fp32 partials are summed in rank order 0..W-1 on every rank (for "
        "example by reading every peer's buffer through symmetric memory). Bitwise identical for a "
        "given world size on any GPU; NCCL's ring and tree orders are not."
    ),
    shapes=(
        Shape("tiny", {"M": 4, "N": 64, "K": 256}),
        Shape("decode", {"M": 16, "N": 4096, "K": 14336}, default=True),
        Shape("prefill", {"M": 2048, "N": 4096, "K": 14336}),
    ),
    roofline=roofline,
    tolerance=BITWISE_ORDER,
    tags=("reproducible", "gemm", "allreduce"),
)
