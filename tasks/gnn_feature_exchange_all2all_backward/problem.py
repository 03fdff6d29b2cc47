"""GNN feature exchange (DGL distributed sampling, backward): return the gradients of served
feature rows to their owners and accumulate them per seed node.

Rank r holds grad_output (sum(counts_sent), H) fp32, seed_inverse_ids (sum(counts_received),)
int64 in [0, seed_size), seed_size, and two lists of W counts. Chunk c of each list concerns rank
(r + c) mod W: grad_output's chunk c (counts_sent[c] rows) goes to that rank, and
counts_received[c] rows arrive from it. The arrived rows, in chunk order, are summed into a
(seed_size, H) fp32 gradient: row i of them is added to row seed_inverse_ids[i] (the transpose of
the forward's gather local_features[seed_inverse_ids]).

Draws: a (W, W) matrix C, the same on every rank, where C[s, d] rows go from rank s to rank d;
each row of C cuts N at W-1 uniform random points, so every rank sends N rows and receives N on
average, unevenly. seed_size = N/2 (the public suite's ratio): about two rows per seed node.

Roofline per GPU, one phase (a row can be accumulated as soon as it arrives). Counts are random:
the roofline uses means; fp32 throughout (4 bytes).
- NVLink: the rows bound for other ranks, (W-1)/W * N * H * 4.
- HBM: read grad_output (N*H*4) and the ids (8N), write the gradient once (N/2 * H * 4; the
  accumulation stays on chip or in L2).
- FLOPs: one fp32 addition per arrived element, N*H.
"""

from tasks.spec import Phase, Problem, Shape, Tolerance


def roofline(dims, world_size, dtype):
    n, h = dims["N"], dims["H"]
    w = world_size
    return [
        Phase(
            "all_to_all + scatter_add",
            flops=n * h,
            hbm_bytes=n * h * 4 + 8 * n + (n // 2) * h * 4,
            comm_bytes=(w - 1) / w * n * h * 4,
            unit="fp32",
        )
    ]


PROBLEM = Problem(
    id="gnn_feature_exchange_all2all_backward",
    pkb_id=66,
    title="GNN feature exchange all-to-all, backward",
    level=2,
    parallelism="non-LLM",
    origin="DGL",
    description=(
        "Backward of the distributed GNN feature exchange (DGL): every rank holds grad_output "
        "(sum(counts_sent), H) fp32, seed_inverse_ids (sum(counts_received),) int64, seed_size, and "
        "two lists of W counts, counts_sent and counts_received (then group = None). Entry c of each "
        "list concerns rank (r + c) mod W: chunk c of grad_output goes to it, counts_received[c] rows "
        "come from it. Return the (seed_size, H) fp32 sum of the received rows (in chunk order) into "
        "the rows seed_inverse_ids names, duplicates accumulated. An uneven all-to-all (counts "
        "random, about N rows per rank) fused with a scatter-add; NVLink-bound at the default shape."
    ),
    shapes=(
        Shape("small", {"N": 64, "H": 16}),
        Shape("default", {"N": 1024, "H": 128}, default=True),
        Shape("large", {"N": 8192, "H": 128}),
    ),
    roofline=roofline,
    dtype="float32",
    tolerance=Tolerance(atol=1e-5, rtol=0.0, reason=(
        "measured against a float64 accumulation (W=2 and 4, small and default shapes, 4 draws each): "
        "fp32 scatter-add sums of a few rows differ by at most 1.1e-6 (values up to 13); 9x margin"
    )),
)
