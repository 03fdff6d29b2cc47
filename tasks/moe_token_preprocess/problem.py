"""MoE token preprocessing for expert parallelism: per-rank token counts and all-to-all splits.

Rank r holds expert_mask (E, K, T) in float32, a one-hot routing tensor for its T tokens
(expert_mask[e, k, t] = 1 when the k-th choice of token t is expert e; each token picks K distinct
experts uniformly at random). Experts are split evenly, L = E/W consecutive experts per rank.
It returns, all on the CPU:
- input_splits (W,) int64: how many of its routed tokens go to each rank's experts,
- output_splits (W,) int64: how many routed tokens every rank sends to it,
- num_global_tokens_per_local_expert (W, L) float32: tokens from each rank for each local expert,
- their column sums (L,) float32.
E is a multiple of 8, so W in (2, 4, 8) divides it.

Roofline per GPU, one phase (counting is tile-local; the exchange needs only the counts):
- HBM: read the mask once (E*K*T*4 bytes) and write the small outputs
  (2*W*8 + W*L*4 + L*4 bytes).
- NVLink: rank s needs only this rank's counts for its own L experts, so W-1 messages of L
  4-byte counts: (W-1)*L*4 bytes.
- FLOPs: one addition per mask element (E*K*T) on CUDA cores.
Every shape is latency-bound on real hardware: the problem exists to test how cheaply a kernel
turns routing into split sizes and exchanges them.
"""

from tasks.spec import BITWISE, Phase, Problem, Shape


def roofline(dims, world_size, dtype):
    t, e, k = dims["T"], dims["E"], dims["K"]
    w = world_size
    local = e // w
    outputs = 2 * w * 8 + w * local * 4 + local * 4
    return [
        Phase(
            "count_exchange",
            flops=e * k * t,
            hbm_bytes=e * k * t * 4 + outputs,
            comm_bytes=(w - 1) * local * 4,
            unit="fp32",
        )
    ]


PROBLEM = Problem(
    id="moe_token_preprocess",
    pkb_id=26,
    title="MoE token preprocessing (split sizes)",
    level=2,
    parallelism="EP",
    origin="Megatron-LM token dispatcher (VeOmni)",
    description=(
        "Every rank holds a one-hot routing mask (E, K, T) for its T tokens and top-K routing over E "
        "experts, L = E/W experts per rank. Return the all-to-all input and output split sizes and "
        "the per-source, per-local-expert token counts (on the CPU, as the dispatcher uses them "
        "for host-side split lists). The step before every expert-parallel all-to-all; integer "
        "results, bit-exact; latency-bound at every size."
    ),
    shapes=(
        Shape("small", {"T": 16, "E": 8, "K": 2}),
        Shape("default", {"T": 1024, "E": 8, "K": 2}, default=True),
        Shape("large", {"T": 16384, "E": 64, "K": 8}),
    ),
    roofline=roofline,
    dtype="float32",
    tolerance=BITWISE,
)
