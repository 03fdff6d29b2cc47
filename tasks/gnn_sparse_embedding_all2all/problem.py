"""GNN sparse embedding all-to-all (DGL's distributed sparse optimizer): route each (node id,
gradient row) pair to the rank that owns the node.

Rank r holds idx (N,) int64 node ids in [0, V), value (N, H) bf16 (one row per id) and
num_nodes = V. Node v is owned by rank v mod W. Every rank returns (recv_idx, recv_value): the
pairs whose owner it is, grouped by source rank in rank order and, within a source, in that
source's original order (a stable partition by owner). ids are uniform, so every rank receives
N pairs on average, unevenly; ids repeat across and within ranks.

Roofline per GPU, e bytes per element of value, two phases (a rank can place what it receives
only once it knows how much every source sends it: the counts are exchanged first, a hard sync).
Counts are random: the roofline uses means.
1. count + exchange counts: HBM reads idx (8N); NVLink carries W-1 counts of 8 bytes; no
   arithmetic (a histogram).
2. partition + all-to-all: NVLink carries the pairs owned by other ranks,
   (W-1)/W * N * (8 + H*e); HBM reads idx and value and writes the received pairs,
   2 * N * (8 + H*e).
"""

from tasks.spec import BITWISE, Phase, Problem, Shape, dtype_bytes


def roofline(dims, world_size, dtype):
    n, h = dims["N"], dims["H"]
    w = world_size
    pair = 8 + h * dtype_bytes(dtype)
    return [
        Phase("count + exchange counts", hbm_bytes=8 * n, comm_bytes=(w - 1) * 8, unit="fp32"),
        Phase("partition + all_to_all", hbm_bytes=2 * n * pair, comm_bytes=(w - 1) / w * n * pair, unit="fp32"),
    ]


PROBLEM = Problem(
    id="gnn_sparse_embedding_all2all",
    pkb_id=67,
    title="GNN sparse embedding all-to-all",
    level=2,
    parallelism="non-LLM",
    origin="DGL",
    description=(
        "Sparse embedding update of a distributed GNN (DGL): every rank holds idx (N,) int64 node ids "
        "in [0, num_nodes), value (N, H) bf16 gradient rows, and num_nodes (then group = None). Node v "
        "belongs to rank v mod W. Return (recv_idx, recv_value), int64 (R,) and bf16 (R, H): the pairs "
        "this rank owns, grouped by source rank in rank order, each source's pairs in their original "
        "order (a stable partition). A histogram, an exchange of counts, then an uneven all-to-all of "
        "ids and rows; pure data movement, bit-exact. NVLink-bound at the default shape (under a "
        "microsecond on H100: in practice the two dependent exchanges' latency dominates)."
    ),
    shapes=(
        Shape("small", {"N": 64, "H": 16, "V": 1000}),
        Shape("default", {"N": 1024, "H": 128, "V": 100000}, default=True),
        Shape("large", {"N": 50000, "H": 128, "V": 400000}),
    ),
    roofline=roofline,
    tolerance=BITWISE,
)
