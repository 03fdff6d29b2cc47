"""One decode step of a tensor-parallel transformer block, reproducible bit for bit.

A Llama-style block (RMSNorm, grouped-query attention with rotary embeddings over a bf16 KV
cache, SwiGLU MLP) for B sequences, one new token each. Heads and the MLP's hidden dimension are
split over the W ranks: attention and the gate/up projection are column-parallel, the output and
down projections row-parallel followed by an all-reduce. Every rank returns the same fp32 [B, D].

Every number is defined exactly (tasks/reproducible/ops.py, tasks/reproducible/gemm.py):
- every dot product and row sum is a reproducible GEMM (chunks of 512 k, fp32 FMA chains in
  order, chunk partials added in order); row sums multiply by a bf16 ones vector;
- RMSNorm: (h / sqrt(sum(h*h) / D + eps)) * g, eps = 1e-5, the root correctly rounded to fp32
  (an IEEE fp32 square root; the reference takes it in fp64 and rounds);
- rotary embedding, rotate-half convention, with the given cos and sin;
- the new key and value are rounded to bf16 and appended to the cache (position T);
- softmax: e = exp(s - max), e / sum(e), with exp built from IEEE operations (ops.exp);
  attention scores are scaled by fl32(1/sqrt(Dh)) after the dot product;
- SiLU(z) = z / (1 + exp(-z));
- all-reduce: fp32 partials added in rank order 0..W-1; NaN stored as 0x7FC00000.
The value cache is stored transposed, [B, KVH/W, Dh, T], so that both attention products read
rows of contiguous 16-bit values.

Roofline, per rank, n_q = H/W, n_kv = KVH/W, f = F/W, Dh = D/H, two phases:
- attention: FLOPs 2*B*D*(n_q + 2 n_kv)*Dh + 4*B*n_q*(T+1)*Dh + 2*B*n_q*Dh*D; HBM the weights
  (D*(2 n_q + 2 n_kv)*Dh)*2 + the KV cache 2*B*n_kv*T*Dh*2 bytes; NVLink 2(W-1)/W * B*D*4.
- mlp: FLOPs 2*B*D*3f; HBM 3*D*f*2 bytes; NVLink 2(W-1)/W * B*D*4.
fp32 CUDA cores: tensor cores are excluded by the exactness requirement.
"""

from tasks.repro_linear.problem import BITWISE_ORDER
from tasks.spec import Phase, Problem, Shape


def roofline(dims, world_size, dtype):
    b, d, w, t = dims["B"], dims["D"], world_size, dims["T"]
    dh = d // dims["H"]
    nq, nkv, f = dims["H"] // w, dims["KVH"] // w, dims["F"] // w
    comm = 2 * (w - 1) / w * b * d * 4
    attn_weights = d * (2 * nq + 2 * nkv) * dh
    attn_flops = 2.0 * b * d * (nq + 2 * nkv) * dh + 4.0 * b * nq * (t + 1) * dh + 2.0 * b * nq * dh * d
    return [
        Phase(
            "attention",
            flops=attn_flops,
            hbm_bytes=attn_weights * 2 + 2 * b * nkv * t * dh * 2,
            comm_bytes=comm,
            unit="fp32",
        ),
        Phase("mlp", flops=2.0 * b * d * 3 * f, hbm_bytes=3 * d * f * 2, comm_bytes=comm, unit="fp32"),
    ]


PROBLEM = Problem(
    id="repro_decode_block",
    title="Reproducible decode step of a tensor-parallel transformer block",
    level=5,
    parallelism="TP",
    origin="Reproducible GEMM track: fixed-order fused-upcast kernels",
    description=(
        "One greedy-decoding step of a Llama-style block (RMSNorm, GQA attention with RoPE over a bf16 "
        "KV cache, SwiGLU MLP), heads and MLP split over the ranks, two deterministic all-reduces. "
        "Every operation has a fixed order and IEEE-only arithmetic, so the output must be bitwise "
        "identical to the reference on any GPU: the property that makes greedy decoding reproducible."
    ),
    shapes=(
        Shape("tiny", {"B": 2, "D": 128, "H": 8, "KVH": 8, "F": 256, "T": 16}),
        Shape("default", {"B": 8, "D": 2048, "H": 16, "KVH": 8, "F": 5632, "T": 512}, default=True),
        Shape("llama8b", {"B": 16, "D": 4096, "H": 32, "KVH": 8, "F": 14336, "T": 2048}),
    ),
    roofline=roofline,
    tolerance=BITWISE_ORDER,
    tags=("reproducible", "decode", "allreduce"),
)
