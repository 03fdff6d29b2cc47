"""Ulysses sequence-to-head all-to-all: gather the sequence, scatter the heads.

Rank r holds x (B, T, NH, D): its T-token slice of a W*T-token sequence, all NH heads. It returns
(B, W*T - P, NH/W, D): head group r (heads [r*NH/W, (r+1)*NH/W)) for the whole sequence, ranks'
slices concatenated in rank order. P > 0 models a sequence padded to a multiple of W: the input
carries unpadded_dim_size = W*T - P and the P padding tokens at the end (the tail of the last
rank's slice) are cut from the output. P is odd and below T, so the cut happens for every W in
(2, 4, 8). NH is a multiple of 8.

Roofline, X = B*T*NH*D elements per rank, e bytes per element, W ranks, one phase:
- NVLink: each rank keeps its own head group and sends the other W-1 groups of its slice, X/W
  elements each, to their owners: (W-1)/W * X * e bytes (the last rank could skip its P padding
  tokens; the busiest GPU, any other, cannot).
- HBM: read x once (X*e), write the output once (B*(W*T-P)*NH/W*D*e).
- No arithmetic.
"""

from tasks.spec import BITWISE, Phase, Problem, Shape, dtype_bytes


def roofline(dims, world_size, dtype):
    b, t, nh, d, p = dims["B"], dims["T"], dims["NH"], dims["D"], dims["P"]
    w, e = world_size, dtype_bytes(dtype)
    x_bytes = b * t * nh * d * e
    out_bytes = b * (w * t - p) * (nh // w) * d * e
    return [Phase("all_to_all", hbm_bytes=x_bytes + out_bytes, comm_bytes=(w - 1) / w * x_bytes, unit="fp32")]


PROBLEM = Problem(
    id="ulysses_gather_seq_scatter_heads",
    pkb_id=36,
    title="Ulysses: gather sequence, scatter heads",
    level=2,
    parallelism="SP",
    origin="DeepSpeed-Ulysses (VeOmni)",
    description=(
        "Every rank holds its sequence slice of an attention activation, (B, T, NH, D) in bf16. "
        "Return the full sequence for this rank's group of NH/W heads, (B, W*T - P, NH/W, D), with "
        "the padding tokens named by unpadded_dim_size removed. This is the all-to-all before "
        "attention in Ulysses sequence parallelism. Pure data movement with a layout change, "
        "bit-exact; NVLink-bound once the slices are large."
    ),
    shapes=(
        Shape("small-padded", {"B": 2, "T": 8, "NH": 8, "D": 16, "P": 3}),
        Shape("default", {"B": 16, "T": 128, "NH": 8, "D": 64, "P": 0}, default=True),
        Shape("long", {"B": 16, "T": 1024, "NH": 8, "D": 64, "P": 0}),
        Shape("large-padded", {"B": 4, "T": 4096, "NH": 32, "D": 128, "P": 7}),
    ),
    roofline=roofline,
    tolerance=BITWISE,
)
