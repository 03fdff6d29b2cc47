"""GNN link-prediction evaluation with negative sampling (DGL-KE): the rank of every positive
edge's score among its negatives, over all ranks' edges.

Rank r holds local_pos_scores (P_r,) bf16 and local_neg_scores (P_r, K) bf16, K negative scores
per positive edge; P_r = P + (0, 1 or 2 drawn per rank and call), so ranks hold different counts.
Every rank returns the same int64 vector of sum(P_r) ranks, ranks' edges in rank order: the
1-based position of the positive's sigmoid score when its row (positive and K negatives) is
sorted in descending order, that is 1 + the number of negatives scoring strictly higher.

Ties: torch.sort is not stable, so a negative whose bf16 sigmoid equalled its positive's would
make the rank depend on the sort. The draws exclude that: every negative whose sigmoid (of its
bf16 score, exact) lies within 1.5 bf16 steps (at the larger of the two) of its positive's is
drawn again, so the bf16 sigmoids of a positive and each of its negatives differ and order them
as the raw scores do; every honest comparison (raw scores, fp32 or bf16 sigmoids, any sort) gives
the same rank.

Roofline per GPU, e bytes per element, one phase: the public reference all-gathers every score,
but a rank is a function of one row only, so each rank can rank its own edges and all-gather the
int64 results, pushing each tile of ranks as soon as it is counted. Counts use the mean P + 1.
- FLOPs: one comparison per negative, (P+1)*K (fp32 units).
- HBM: read the rank's scores, (P+1)*(K+1)*e; write the W*(P+1) ranks, 8 bytes each.
- NVLink: this rank's (P+1) ranks to each of the W-1 others: (W-1)*(P+1)*8.
"""

from tasks.spec import BITWISE, Phase, Problem, Shape, dtype_bytes


def roofline(dims, world_size, dtype):
    p, k = dims["P"] + 1, dims["K"]
    w = world_size
    return [
        Phase(
            "rank + all_gather ranks",
            flops=p * k,
            hbm_bytes=p * (k + 1) * dtype_bytes(dtype) + w * p * 8,
            comm_bytes=(w - 1) * p * 8,
            unit="fp32",
        )
    ]


PROBLEM = Problem(
    id="gnn_negative_scoring",
    pkb_id=69,
    title="GNN negative-sampling ranking",
    level=2,
    parallelism="non-LLM",
    origin="DGL-KE",
    description=(
        "Link-prediction evaluation (DGL-KE): every rank holds local_pos_scores (P_r,) bf16 and "
        "local_neg_scores (P_r, K) bf16, K negative-edge scores per positive edge, P_r differing from "
        "rank to rank (then group = None). Return, on every rank, the int64 (sum P_r,) vector of every "
        "rank's positives in rank order: 1 + the number of its row's negatives whose sigmoid score is "
        "higher than the positive's. Inputs are drawn so that no negative ties its positive (their bf16 "
        "sigmoids differ by more than a bf16 step), so the rank is unambiguous. The reference "
        "all-gathers every score; only the ranks need to travel. HBM-bound (reading the scores) at the "
        "default shape."
    ),
    shapes=(
        Shape("small", {"P": 8, "K": 100}),
        Shape("default", {"P": 256, "K": 1000}, default=True),
        Shape("large", {"P": 1280, "K": 1000}),
    ),
    roofline=roofline,
    tolerance=BITWISE,
)
