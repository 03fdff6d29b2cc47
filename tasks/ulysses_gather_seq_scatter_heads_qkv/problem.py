"""Ulysses sequence-to-head all-to-all of a fused QKV projection.

Rank r holds qkv (B, T, 3*NH*D): its T-token slice, with the q, k and v projections of all NH heads
side by side. It returns (B, W*T - P, 3*NH*D/W): for the whole sequence, head group r of q, then of
k, then of v (each NH*D/W wide). P > 0 models padding: the input carries
unpadded_dim_size = W*T - P and the last P tokens are cut (P odd and below T, so the cut happens
for every W in (2, 4, 8)). NH is a multiple of 8.

Roofline, X = B*T*3*NH*D elements per rank, e bytes per element, W ranks, one phase:
- NVLink: each rank keeps its own head group of q, k and v and sends the other W-1 groups, X/W
  elements each: (W-1)/W * X * e bytes from the busiest GPU.
- HBM: read qkv once, write the output once (B*(W*T-P)*3*NH*D/W*e).
- No arithmetic.
"""

from tasks.spec import BITWISE, Phase, Problem, Shape, dtype_bytes


def roofline(dims, world_size, dtype):
    b, t, nh, d, p = dims["B"], dims["T"], dims["NH"], dims["D"], dims["P"]
    w, e = world_size, dtype_bytes(dtype)
    x_bytes = b * t * 3 * nh * d * e
    out_bytes = b * (w * t - p) * 3 * nh * d // w * e
    return [Phase("all_to_all", hbm_bytes=x_bytes + out_bytes, comm_bytes=(w - 1) / w * x_bytes, unit="fp32")]


PROBLEM = Problem(
    id="ulysses_gather_seq_scatter_heads_qkv",
    pkb_id=38,
    title="Ulysses: gather sequence, scatter heads of fused QKV",
    level=2,
    parallelism="SP",
    origin="DeepSpeed-Ulysses (VeOmni)",
    description=(
        "Every rank holds its sequence slice of a fused QKV projection, (B, T, 3*NH*D) in bf16. "
        "Return the whole sequence for this rank's head group of q, k and v, (B, W*T - P, "
        "3*NH*D/W), padding tokens removed. One all-to-all moves q, k and v together before Ulysses "
        "attention. Pure data movement with a layout change, bit-exact; NVLink-bound for long "
        "sequences (a pull kernel over NVLink reached 3.73x over NCCL at T=1024 in the paper)."
    ),
    shapes=(
        Shape("small-padded", {"B": 2, "T": 8, "NH": 8, "D": 16, "P": 5}),
        Shape("default", {"B": 16, "T": 64, "NH": 8, "D": 64, "P": 0}, default=True),
        Shape("long", {"B": 16, "T": 1024, "NH": 8, "D": 64, "P": 0}),
        Shape("large-padded", {"B": 2, "T": 4096, "NH": 32, "D": 128, "P": 3}),
    ),
    roofline=roofline,
    tolerance=BITWISE,
)
