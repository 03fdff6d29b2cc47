"""DINOv2 k-NN evaluation, distributed: the k most similar train features of every test feature,
with their labels, over every rank's shard of the train set.

Rank r holds test_features_rank (Q, D) bf16, train_features_rank_T (D, T) bf16 (its train shard,
transposed), train_labels_rank (1, T) int64 and max_k = K. It returns (sims (Q, K) bf16,
labels (Q, K) int64) for its own queries: the K largest dot products with the W*T train features
of all ranks, in descending order, and those features' labels.

Ties: bf16 similarities of random features tie often and torch.topk orders ties arbitrarily, so
the draws are built to leave none. Queries are signed rows of a Hadamard block (unit vectors with
entries +-2^-j, j = log4 of the block) on random feature positions; each train feature is m/256
(m an integer below 256) times one query, plus Gaussian noise on the positions no query uses.
Every similarity is then m/256 or 0, exact in any fp32 accumulation order and in bf16; each
query's own train features have K+1 distinct m and the rest smaller, so its top K is unique.
Constraints: Q*W <= the block (the largest power of 4 <= D), T/Q >= K+1 and Q divides T.

Roofline per GPU, e = 2 bytes (bf16), G = W*Q queries, 8-byte labels, two phases:
1. all-gather queries + similarities + local top-K: every rank needs every query (its shard is
   scored against all of them), so it sends its Q*D*e query bytes to W-1 peers; a tile of
   queries is scored as soon as it arrives. FLOPs 2*G*T*D on bf16 tensor cores (the top-K
   selection is not counted). HBM reads the train shard (T*D*e) and the G queries (G*D*e),
   writes the (W-1)*Q*D*e received queries and the G*K candidates (e + 8 bytes each); the
   similarity matrix stays on chip.
2. candidates to their owners + merge: each rank sends (W-1)*Q*K candidates of e + 8 bytes; the
   owner reads W*Q*K candidates and writes its Q*K results.
"""

from tasks.spec import BITWISE, Phase, Problem, Shape, dtype_bytes


def roofline(dims, world_size, dtype):
    q, t, d, k = dims["Q"], dims["T"], dims["D"], dims["K"]
    w, e = world_size, dtype_bytes(dtype)
    g = w * q
    cand = e + 8
    return [
        Phase(
            "all_gather queries + similarity + local top-k",
            flops=2 * g * t * d,
            hbm_bytes=(t * d + g * d + (w - 1) * q * d) * e + g * k * cand,
            comm_bytes=(w - 1) * q * d * e,
            unit="bf16_tc",
        ),
        Phase(
            "candidates to owners + merge",
            hbm_bytes=w * q * k * cand + q * k * cand,
            comm_bytes=(w - 1) * q * k * cand,
            unit="bf16_tc",
        ),
    ]


PROBLEM = Problem(
    id="dinov2_distributed_knn",
    pkb_id=79,
    title="DINOv2 distributed k-NN",
    level=3,
    parallelism="non-LLM",
    origin="DINOv2",
    description=(
        "DINOv2 k-NN evaluation with the train set sharded: every rank holds test_features_rank (Q, D) "
        "bf16, train_features_rank_T (D, T) bf16, train_labels_rank (1, T) int64 and max_k (then group = "
        "None). Return, for this rank's queries, the max_k largest similarities (bf16 dot products, "
        "descending) over every rank's train features, (Q, max_k) bf16, and their labels, (Q, max_k) "
        "int64. The draws make every similarity exact in bf16 under any fp32 accumulation order and "
        "leave no ties within a query's max_k + 1 best, so the answer is unique (both outputs compared "
        "bit for bit). Queries travel to every shard, candidates back to their owner; HBM-bound "
        "(reading the train shard) at the default shape."
    ),
    shapes=(
        Shape("small", {"Q": 4, "T": 64, "D": 96, "K": 10}),
        Shape("default", {"Q": 32, "T": 8192, "D": 384, "K": 200}, default=True),
        Shape("large", {"Q": 64, "T": 16384, "D": 1024, "K": 200}),
    ),
    roofline=roofline,
    tolerance=BITWISE,
)
