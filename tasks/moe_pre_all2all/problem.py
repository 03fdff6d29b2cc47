"""MoE dispatch: permute tokens by expert, all-to-all them to the experts' ranks, and group them
by local expert.

Rank r holds hidden_states (T, H), expert_mask (E, K, T) (one-hot top-K routing over E experts,
K distinct experts per token, uniformly at random) and the split metadata produced by
moe_token_preprocess for that routing. Experts are split evenly, L = E/W per rank. It returns
- the tokens routed to its L experts from every rank, grouped by local expert, then by source
  rank, then by token order (R, H),
- routing_map = expert_mask.sum(1) (E, T) float32,
- the token index of every routed copy in expert-major order (K*T,) int64,
- the original hidden_states shape (torch.Size).
E is a multiple of 8, so W in (2, 4, 8) divides it.

Roofline per GPU, e bytes per element, one phase (permuting, sending and grouping stream tile
by tile once the split sizes are known). Routing is random, so the roofline uses expected values:
a token reaches a given rank with probability p = 1 - C(E-L, K)/C(E, K).
- NVLink: a token needs to cross to each other rank that holds one of its experts once (the
  receiver can copy it for a second local expert): T*(W-1)*p rows of H*e bytes.
- HBM: read hidden_states once (T*H*e) and the mask (E*K*T*4); write the dispatched rows
  (K*T rows on average: every rank receives its share of the W*K*T routed copies) and the two
  index outputs (E*T*4 + K*T*8). The split lists are a few dozen bytes and left out.
- No arithmetic.
"""

import math

from tasks.spec import BITWISE, Phase, Problem, Shape, dtype_bytes


def hit_probability(experts: int, top_k: int, world_size: int) -> float:
    """Probability that a token with top_k distinct uniform experts reaches a given rank."""
    local = experts // world_size
    return 1.0 - math.comb(experts - local, top_k) / math.comb(experts, top_k)


def roofline(dims, world_size, dtype):
    t, h, e, k = dims["T"], dims["H"], dims["E"], dims["K"]
    w, b = world_size, dtype_bytes(dtype)
    row = h * b
    p = hit_probability(e, k, w)
    hbm = t * row + e * k * t * 4 + k * t * row + e * t * 4 + k * t * 8
    return [Phase("permute_dispatch", hbm_bytes=hbm, comm_bytes=t * (w - 1) * p * row, unit="fp32")]


PROBLEM = Problem(
    id="moe_pre_all2all",
    pkb_id=28,
    title="MoE dispatch: permute, all-to-all, regroup",
    level=3,
    parallelism="EP",
    origin="Megatron-LM token dispatcher (VeOmni)",
    description=(
        "Every rank holds T tokens of width H in bf16, their one-hot top-K routing over E experts and "
        "the all-to-all split sizes. Permute the tokens by expert, all-to-all them to the ranks that "
        "own those experts, and return the received tokens grouped by local expert and source rank, "
        "with the routing map and the permutation needed to undo it. The dispatch half of expert "
        "parallelism; bit-exact; NVLink-bound for large hidden sizes."
    ),
    shapes=(
        Shape("small", {"T": 16, "H": 64, "E": 8, "K": 2}),
        Shape("default", {"T": 1024, "H": 1024, "E": 8, "K": 2}, default=True),
        Shape("large", {"T": 4096, "H": 2048, "E": 64, "K": 8}),
    ),
    roofline=roofline,
    tolerance=BITWISE,
)
