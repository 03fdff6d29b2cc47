"""TorchRec KeyedJaggedTensor all-to-all (the input distribution of sharded embedding tables):
route each sparse feature's jagged ids to the rank that owns its table, then regroup them
feature-major.

There are F = sum(key_splits) features; key_splits[d] = 1 + d mod 3 of them (consecutive, in
order) belong to rank d. Rank r holds the feature-major jagged batch of B samples: lengths (F*B,)
int64 (lengths[f*B + b] ids for sample b of feature f, uniform in [L/4, L]) and values (sum of
lengths,) int64 ids in [0, 10^6); the call is solution(lengths, values, key_splits, B, None).
Rank r returns a dict: "lengths" (k_r*W*B,) and "values", its k_r features gathered from every
source, ordered feature, then source rank, then sample (TorchRec's recat); "stride" (0-dim, W*B)
and "stride_per_rank" (W,), every source's batch size. Pure data movement, bit-exact.

Roofline per GPU, rank r with k_r features, lbar = (L/4 + L)/2 ids per sample on average, a
segment of one feature and one sample taking 8*(1 + lbar) bytes (its length and its ids). Two
phases (a rank can place the values it receives only once it knows how many every source sends:
the splits are exchanged first, a hard sync). Lengths are random: the roofline uses means, at the
rank that sends most (k_r = 1: it keeps the fewest features).
1. splits: HBM reads lengths (8*F*B) to sum each destination's ids; NVLink carries W-1 rows of
   three int64 (length, value and batch splits) to the other ranks.
2. all-to-all + recat: NVLink carries the segments of the F - k_r features owned by others,
   (F - k_r)*B*8*(1 + lbar); HBM reads every local segment and writes every received one, placed
   directly at its recat offset (F*B + W*k_r*B segments of 8*(1 + lbar) bytes).
"""

from tasks.spec import BITWISE, Phase, Problem, Shape


def key_splits(world_size: int) -> list[int]:
    return [1 + d % 3 for d in range(world_size)]


def roofline(dims, world_size, dtype):
    b, length = dims["B"], dims["L"]
    w = world_size
    splits = key_splits(w)
    f = sum(splits)
    k = min(splits)
    segment = 8 * (1 + (length // 4 + length) / 2)
    return [
        Phase("splits", hbm_bytes=8 * f * b, comm_bytes=(w - 1) * 3 * 8, unit="fp32"),
        Phase("all_to_all + recat", hbm_bytes=(f * b + w * k * b) * segment,
              comm_bytes=(f - k) * b * segment, unit="fp32"),
    ]


PROBLEM = Problem(
    id="torchrec_kjt_all2all",
    pkb_id=70,
    title="TorchRec KeyedJaggedTensor all-to-all",
    level=3,
    parallelism="non-LLM",
    origin="TorchRec KJTAllToAll (sparse input distribution)",
    description=(
        "Sharded embedding tables (TorchRec): F = sum(key_splits) sparse features, key_splits[d] = 1 + d mod 3 "
        "consecutive features owned by rank d. Every rank holds a feature-major jagged batch of B samples: "
        "lengths (F*B,) int64 (lengths[f*B + b] ids of feature f for sample b) and values (sum(lengths),) int64 "
        "ids; the call is solution(lengths, values, key_splits, B, None). Send every feature's lengths and values "
        "to its owner (an exchange of the splits, then uneven all-to-alls) and return the dict {'lengths', "
        "'values', 'stride', 'stride_per_rank'}: this rank's k features from every source in recat order "
        "(feature, then source rank, then sample), stride = W*B as a 0-dim int64 tensor and stride_per_rank "
        "(W,) = B from every source. Pure data movement, bit-exact. NVLink-bound at the default shape (a few "
        "microseconds on H100: in practice the two dependent exchanges' latency dominates)."
    ),
    shapes=(
        Shape("small", {"B": 8, "L": 8}),
        Shape("default", {"B": 1024, "L": 20}, default=True),
        Shape("large", {"B": 8192, "L": 40}),
    ),
    roofline=roofline,
    tolerance=BITWISE,
)
