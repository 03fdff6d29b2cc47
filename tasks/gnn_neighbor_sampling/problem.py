"""GNN distributed neighbour sampling (PyG / GraphLearn style): multi-hop sampling of a graph
whose neighbour lists are partitioned across ranks by node owner.

Every rank holds seed_nodes (S,) int64, distinct; fanouts [F1, F2]; colptr (V+1,) of a directed
graph in CSC form (node v's in-neighbours are row positions colptr[v] .. colptr[v+1]-1, each node
has 1 to 2*DEG-1); local_adj_col (nnz,) int64, which holds the true in-neighbours only for the
nodes this rank owns (the other entries are junk: another rank's business); node_to_rank (V,)
owner of every node (random); group = None; replace = False (ignored). colptr and node_to_rank are
replicated, the graph and the owners are random, the neighbour lists in random order.

Sampling rule (deterministic, so every honest solution gives the same bits): a node v sampled
with fanout f takes its first min(f, degree) in-neighbours in stored order, positions colptr[v],
colptr[v]+1, ...; since the lists are in random order this is a uniform sample without
replacement driven by the inputs. Hop h samples every node of the frontier (hop 1: the seeds,
hop h+1: the nodes first reached at hop h) with fanout F_h, the frontier in order, each node's
sample in stored order; the frontier's owners must do it, as only they hold the lists. Outputs,
all int64: node, the seeds followed by each hop's newly reached distinct nodes in order of first
appearance; row and col, for every sampled edge (hop by hop, frontier order, stored order), the
positions in node of the neighbour and of the frontier node it was sampled for; edge, that
edge's position in the CSC arrays. Each rank samples its own seeds; ranks answer each other.

Roofline per GPU, expected values, 8-byte ids; m(f) = E[min(f, degree)] for a degree uniform on
1..2*DEG-1; hop 1 samples n1 = S nodes, hop 2 n2 = S*m(F1) (an upper bound: repeats ignored),
E = n1*m(F1) + n2*m(F2) edges, n3 = n2*m(F2). No arithmetic; a lower bound that touches every
byte once. Per hop h (frontier n, fanout f, m = m(f)), two phases (an owner samples only what it
was asked, a requester continues only with every reply):
1. requests: HBM reads the frontier and its owners (16n); NVLink carries (W-1) counts and
   (W-1)/W * n ids (8 bytes each).
2. sample + replies: HBM reads two colptr entries per asked node and n*m neighbour ids
   (16n + 8nm) and writes the n*m replied neighbours and edge ids (16nm); NVLink carries
   (W-1)/W * (8n + 16nm) (counts, neighbours, edge ids).
Then relabel: HBM writes node, row, col and edge (8*(n1 + n2 + n3) + 24E).
At the default shape (V = 100000, S = 1024, DEG = 16, fanouts 10, 5) and W = 4 the whole problem
moves about 3.1 MB over HBM and 0.71 MB over NVLink: NVLink-bound (2.1 us on H100, all phases
but the relabel), in practice bound by the latency of its dependent exchanges.
"""

from tasks.spec import BITWISE, Phase, Problem, Shape


def mean_take(fanout: int, degree: int) -> float:
    """E[min(fanout, d)] for d uniform on 1 .. 2*degree - 1."""
    top = 2 * degree - 1
    return sum(min(fanout, d) for d in range(1, top + 1)) / top


def roofline(dims, world_size, dtype):
    w, s, deg = world_size, dims["S"], dims["DEG"]
    fanouts = (dims["F1"], dims["F2"])
    phases, n, edges, nodes = [], float(s), 0.0, float(s)
    for hop, f in enumerate(fanouts, start=1):
        m = mean_take(f, deg)
        phases.append(Phase(f"hop {hop}: requests", hbm_bytes=16 * n,
                            comm_bytes=(w - 1) * 8 + (w - 1) / w * 8 * n, unit="fp32"))
        phases.append(Phase(f"hop {hop}: sample + replies", hbm_bytes=16 * n + 24 * n * m,
                            comm_bytes=(w - 1) / w * (8 * n + 16 * n * m), unit="fp32"))
        edges += n * m
        n *= m
        nodes += n
    phases.append(Phase("relabel", hbm_bytes=8 * nodes + 24 * edges, unit="fp32"))
    return phases


PROBLEM = Problem(
    id="gnn_neighbor_sampling",
    pkb_id=64,
    title="GNN distributed multi-hop neighbour sampling",
    level=4,
    parallelism="non-LLM",
    origin="PyG / GraphLearn distributed neighbour sampler",
    description=(
        "Distributed two-hop neighbour sampling. Inputs: seed_nodes (S,) int64 (distinct), fanouts [F1, F2], "
        "colptr (V+1,) int64 of a CSC graph (replicated), local_adj_col (nnz,) int64 holding correct "
        "in-neighbour lists only for the nodes this rank owns (junk elsewhere), node_to_rank (V,) int64 "
        "(replicated), group = None, replace = False (ignored). Rule: sampling node v with fanout f takes "
        "its first min(f, deg) neighbours in stored order (lists are randomly ordered), done by v's owner. "
        "Hop 1 samples the seeds with F1, hop 2 the nodes first reached at hop 1 (in first-appearance "
        "order) with F2. Return (node, row, col, edge) int64: node = seeds then each hop's new distinct "
        "nodes in first-appearance order; per sampled edge (hop by hop, frontier order, stored order) "
        "row = position in node of the neighbour, col = of the frontier node, edge = its CSC position. "
        "Bit-exact. NVLink-bound in bytes, latency-bound in practice (dependent exchanges)."
    ),
    shapes=(
        Shape("small", {"V": 1000, "S": 16, "DEG": 16, "F1": 10, "F2": 5}),
        Shape("default", {"V": 100000, "S": 1024, "DEG": 16, "F1": 10, "F2": 5}, default=True),
        Shape("large", {"V": 1000000, "S": 2048, "DEG": 16, "F1": 10, "F2": 5}),
    ),
    roofline=roofline,
    tolerance=BITWISE,
)
