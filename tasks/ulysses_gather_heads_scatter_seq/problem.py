"""Ulysses head-to-sequence all-to-all: gather the heads, scatter the sequence.

Rank r holds x (B, T, NH, D): the whole T-token sequence for its NH local heads. The sequence is
padded with zeros to W*c tokens, c = ceil(T/W), and rank r returns (B, c, W*NH, D): tokens
[r*c, (r+1)*c) for all W*NH heads, head groups in rank order. Shapes with T not divisible by W
exercise the padding (the last rank's slice ends in zero rows).

Roofline, c = ceil(T/W), Y = B*NH*D elements per token row, e bytes per element, W ranks:
- NVLink: rank s needs rows [s*c, (s+1)*c) from every other rank. The last rank's own slice is the
  short one, so it sends full c-row slices to all W-1 peers and is the busiest GPU:
  (W-1) * c * Y * e bytes. (Padding rows are zeros and need not travel.)
- HBM: read x once (T*Y*e), write the output once (c*W*Y*e, padding rows included).
- No arithmetic.
"""

from tasks.spec import BITWISE, Phase, Problem, Shape, dtype_bytes


def roofline(dims, world_size, dtype):
    b, t, nh, d = dims["B"], dims["T"], dims["NH"], dims["D"]
    w, e = world_size, dtype_bytes(dtype)
    c = -(-t // w)
    row = b * nh * d * e
    return [Phase("all_to_all", hbm_bytes=t * row + c * w * row, comm_bytes=(w - 1) * c * row, unit="fp32")]


PROBLEM = Problem(
    id="ulysses_gather_heads_scatter_seq",
    pkb_id=37,
    title="Ulysses: gather heads, scatter sequence",
    level=2,
    parallelism="SP",
    origin="DeepSpeed-Ulysses (VeOmni)",
    description=(
        "Every rank holds the full sequence for its local heads, (B, T, NH, D) in bf16. Pad the "
        "sequence with zeros to a multiple of W and return this rank's sequence slice for all heads, "
        "(B, ceil(T/W), W*NH, D). This is the all-to-all after attention in Ulysses sequence "
        "parallelism, the inverse of gather-sequence/scatter-heads. Pure data movement, bit-exact; "
        "NVLink-bound once the sequence is long."
    ),
    shapes=(
        Shape("small-padded", {"B": 2, "T": 30, "NH": 4, "D": 16}),
        Shape("default", {"B": 16, "T": 128, "NH": 8, "D": 64}, default=True),
        Shape("long-padded", {"B": 16, "T": 1026, "NH": 8, "D": 64}),
        Shape("large", {"B": 4, "T": 4096, "NH": 4, "D": 128}),
    ),
    roofline=roofline,
    tolerance=BITWISE,
)
