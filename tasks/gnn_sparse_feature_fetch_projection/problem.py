"""GNN sparse feature fetch + projection: look up node embeddings in a table sharded by node
range across ranks, then project them with a dense matrix.

Rank r holds local_embedding_shard (V/W, D) bf16, rows r*V/W .. (r+1)*V/W - 1 of the node table;
input_node_ids (Q,) int64 uniform in [0, V) (they repeat, and about (W-1)/W of them belong to
other ranks); proj_matrix (D, D) bf16, replicated; num_total_nodes = V; group = None. It returns
(Q, D) bf16: table[input_node_ids] @ proj_matrix, one row per query in query order. The fetch is
exact; only the projection rounds (fp32 accumulation, one rounding to bf16).

The public suite's table has 111M nodes (ogbn-papers100M-like, 57 GB in bf16 at D = 256): every
call's inputs are fresh, so the shapes here keep the table at 64 MiB (default) to 2 GiB (large).
The roofline does not depend on V: only the Q queried rows are touched.

Roofline per GPU, e bytes per element, expected values (ids uniform: a rank serves Q rows on
average, (W-1)/W of its own queries are remote). Two phases (an owner can place requests only
once it knows how many each rank sends, a hard sync):
1. owners + counts: HBM reads the ids (8Q); NVLink: (W-1) 8-byte counts; no arithmetic.
2. request, fetch, project, reply, pipelined: 2*Q*D*D FLOPs on bf16 tensor cores (projecting on
   the owner side before replying costs the same, D_out = D); NVLink carries (W-1)/W * Q ids out
   and as many rows back, (W-1)/W * Q * (8 + D*e); HBM reads the ids again and the served ids
   (16Q), the Q served table rows and the projection (Q*D*e + D*D*e), and writes the output
   (Q*D*e).
At the default shape (Q = 20000, D = 256) and W = 4: 2.6 GFLOP (2.6 us on H100), 20.9 MB of HBM
(6 us) and 7.8 MB over NVLink (17 us): NVLink-bound.
"""

from tasks.spec import Phase, Problem, Shape, Tolerance, dtype_bytes


def roofline(dims, world_size, dtype):
    q, d, w = dims["Q"], dims["D"], world_size
    e = dtype_bytes(dtype)
    return [
        Phase("owners + exchange counts", hbm_bytes=8 * q, comm_bytes=(w - 1) * 8, unit="fp32"),
        Phase(
            "request + fetch + project + reply",
            flops=2 * q * d * d,
            hbm_bytes=16 * q + 2 * q * d * e + d * d * e,
            comm_bytes=(w - 1) / w * q * (8 + d * e),
            unit="bf16_tc",
        ),
    ]


PROBLEM = Problem(
    id="gnn_sparse_feature_fetch_projection",
    pkb_id=68,
    title="GNN sparse feature fetch from a sharded table, then projection",
    level=3,
    parallelism="non-LLM",
    origin="DGL / GraphLearn distributed feature store",
    description=(
        "A node-feature table of V = num_total_nodes rows is sharded by contiguous ranges: rank r holds "
        "local_embedding_shard (V/W, D) bf16 = rows r*V/W onwards. Every rank also holds input_node_ids "
        "(Q,) int64, uniform in [0, V) with repeats, most owned by other ranks, and a replicated "
        "proj_matrix (D, D) bf16; inputs end with num_total_nodes and group = None. Return (Q, D) bf16: "
        "table[input_node_ids] @ proj_matrix, rows in query order. Needs an exchange of counts, the ids "
        "to their owners, the rows back (or projected rows: the projection may run on either side) and "
        "a bf16 GEMM with fp32 accumulation. NVLink-bound at the default shape."
    ),
    shapes=(
        Shape("small", {"V": 4096, "Q": 64, "D": 128}),
        Shape("default", {"V": 131072, "Q": 20000, "D": 256}, default=True),
        Shape("large", {"V": 4194304, "Q": 200000, "D": 256}),
    ),
    roofline=roofline,
    tolerance=Tolerance(
        atol=2e-3,
        atol_unit="rms",
        rtol=2.0**-6,
        reason="the fetch is exact and the projection rounds once (fp32 accumulation): measured against float64 "
        "the reference's worst error is 2^-9 relative (0.016 x rms at the largest elements, none beyond "
        "rtol 2^-9 + 1e-6 x rms; small and default shapes, W = 2 and 4, 4 draws); rtol admits two bf16 "
        "steps at the bottom of a binade (a different fp32 accumulation order may flip one rounding) and "
        "atol 0.002 x rms the fp32 accumulation near zero. fp8 rows on the wire and bf16 accumulation fail",
    ),
)
