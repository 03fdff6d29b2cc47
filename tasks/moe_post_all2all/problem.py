"""MoE combine: regroup expert outputs by source rank, all-to-all them home, and sum each token's
expert outputs weighted by its routing weights.

Rank r holds expert_outputs (R, H): the outputs of its L = E/W local experts for every token
routed to them, grouped by local expert, then source rank (the layout moe_pre_all2all produces).
It also holds, for its own T tokens, routing_weights (T, K), selected_experts (T, K) (K distinct
experts per token, uniformly at random), routing_map (E, T) bool, the expert-major token index of
every routed copy (K*T,), the split metadata and the original shape. It returns (T, H): for each
token, the sum over its K experts of weight * expert output. E is a multiple of 8.

Roofline per GPU, e bytes per element, one phase, expected values (routing is random): a token
reaches a given rank with probability p = 1 - C(E-L, K)/C(E, K).
- NVLink: the least an algorithm must send is one row per (token, remote rank) pair: the expert
  rank can add up a token's rows from its local experts once it knows their weights and token
  ids, which cost e + 4 bytes per remote routed copy:
  T*(W-1)*p*H*e + (W-1)/W * K*T*(e + 4) bytes.
- HBM: read expert_outputs (K*T rows on average), routing_weights, selected_experts,
  routing_map and the permutation once; write the (T, H) result once.
- FLOPs: one multiply-add per routed element, K*T*H*2, on CUDA cores (negligible).
"""

import math

from tasks.spec import Phase, Problem, Shape, Tolerance, dtype_bytes


def hit_probability(experts: int, top_k: int, world_size: int) -> float:
    """Probability that a token with top_k distinct uniform experts reaches a given rank."""
    local = experts // world_size
    return 1.0 - math.comb(experts - local, top_k) / math.comb(experts, top_k)


def roofline(dims, world_size, dtype):
    t, h, e, k = dims["T"], dims["H"], dims["E"], dims["K"]
    w, b = world_size, dtype_bytes(dtype)
    p = hit_probability(e, k, w)
    comm = t * (w - 1) * p * h * b + (w - 1) / w * k * t * (b + 4)
    hbm = k * t * h * b + k * t * b + k * t * 8 + e * t + k * t * 8 + t * h * b
    return [Phase("dispatch_combine", flops=2 * k * t * h, hbm_bytes=hbm, comm_bytes=comm, unit="fp32")]


PROBLEM = Problem(
    id="moe_post_all2all",
    pkb_id=29,
    title="MoE combine: regroup, all-to-all, weighted unpermute",
    level=3,
    parallelism="EP",
    origin="Megatron-LM token dispatcher (VeOmni)",
    description=(
        "Every rank holds the outputs of its local experts for all tokens routed to them (grouped by "
        "local expert and source rank, in bf16) and, for its own T tokens, the top-K routing weights, "
        "routing map and permutation. Send every expert output back to its token's rank and return "
        "(T, H): each token's expert outputs summed with its routing weights. The combine half of "
        "expert parallelism; NVLink-bound for large hidden sizes."
    ),
    shapes=(
        Shape("small", {"T": 16, "H": 64, "E": 8, "K": 2}),
        Shape("default", {"T": 1024, "H": 1024, "E": 8, "K": 2}, default=True),
        Shape("large", {"T": 4096, "H": 2048, "E": 64, "K": 8}),
    ),
    roofline=roofline,
    tolerance=Tolerance(
        atol=3e-2,
        rtol=2e-2,
        reason="bf16 weighted sums of K rows of unit size: bf16 reference vs fp64 needs atol 6.6e-3 at rtol 2e-2 "
        "(small shape W=2 and 4, default W=2 and 4); 4.5x margin",
    ),
)
