"""GNN feature exchange (DGL distributed sampling, forward): serve the feature rows that peers
requested, and receive the rows this rank requested.

Rank r holds local_features (S, H), the features of its S seed nodes, and seed_inverse_ids (R,),
one local row per requested node. counts_received[c] of those requests came from rank
(r + c) mod W and counts_sent[c] went to it (chunk c of each list concerns the peer c steps after
r, so chunk 0 is r itself). seed_inverse_ids is ordered by chunk: its first counts_received[0]
entries answer rank r, the next counts_received[1] rank r+1, and so on. The output is
(sum(counts_sent), H): chunk c holds the rows rank (r + c) mod W sent, in its order.

Draws: a (W, W) matrix C, the same on every rank, where C[s, d] rows go from rank s to rank d;
each row of C cuts N at W-1 uniform random points, so every rank serves N rows and receives N
on average, unevenly. S = 3N/4 (the public suite's ratio): ids repeat.

Roofline per GPU, e bytes per element, one phase (a row can be sent as soon as it is gathered,
so the gather pipelines with the all-to-all). Counts are random: the roofline uses means.
- NVLink: the rows served to other ranks, (W-1)/W * N * H * e.
- HBM: read the ids (8N), read the distinct requested rows once (expected
  S * (1 - (1 - 1/S)^N) rows, about 0.55 N; repeats are served from cache), write the output
  (N*H*e on average).
- No arithmetic.
"""

from tasks.spec import BITWISE, Phase, Problem, Shape, dtype_bytes


def roofline(dims, world_size, dtype):
    n, h = dims["N"], dims["H"]
    e = dtype_bytes(dtype)
    w = world_size
    seeds = 3 * n // 4
    distinct = seeds * (1 - (1 - 1 / seeds) ** n)
    return [
        Phase(
            "gather + all_to_all",
            hbm_bytes=8 * n + distinct * h * e + n * h * e,
            comm_bytes=(w - 1) / w * n * h * e,
            unit="fp32",
        )
    ]


PROBLEM = Problem(
    id="gnn_feature_exchange_all2all",
    pkb_id=65,
    title="GNN feature exchange all-to-all",
    level=2,
    parallelism="non-LLM",
    origin="DGL",
    description=(
        "Distributed GNN sampling (DGL): every rank holds local_features (S, H) bf16, seed_inverse_ids "
        "(R,) int64 indexing its rows, and two lists of W counts, counts_sent and counts_received "
        "(then group = None). Entry c of each list concerns rank (r + c) mod W: counts_received[c] "
        "feature rows requested by that rank are served from local_features[seed_inverse_ids] (the ids "
        "are laid out chunk by chunk in that order) and counts_sent[c] rows come back from it. Return "
        "the (sum(counts_sent), H) bf16 rows received, chunk c from rank (r + c) mod W. A row gather "
        "fused with an uneven all-to-all (counts random, about N rows per rank); pure data movement, "
        "bit-exact. NVLink-bound at the default shape."
    ),
    shapes=(
        Shape("small", {"N": 64, "H": 16}),
        Shape("default", {"N": 1024, "H": 128}, default=True),
        Shape("large", {"N": 8192, "H": 128}),
    ),
    roofline=roofline,
    tolerance=BITWISE,
)
