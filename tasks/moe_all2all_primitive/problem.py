"""MoE all-to-all primitive with uneven splits.

Rank r holds local_tensor (T, H) and split lists: input_split_sizes[s] rows (in order) go to rank
s, and output_split_sizes[s] rows arrive from rank s. It returns the (sum(output_split_sizes), H)
concatenation of what arrives, in source-rank order. Split sizes are random: every rank cuts its
T rows at W-1 uniform random points, so each destination gets T/W rows on average and the load
is uneven, as after top-k routing.

Roofline per GPU, e bytes per element, one phase. The splits are random, so the roofline uses
their mean; the busiest GPU moves at least the mean, so the figure stays a lower bound:
- NVLink: the rows bound for other ranks, (W-1)/W * T * H * e bytes on average.
- HBM: read local_tensor once (T*H*e) and write the output once (T*H*e on average).
- No arithmetic.
"""

from tasks.spec import BITWISE, Phase, Problem, Shape, dtype_bytes


def roofline(dims, world_size, dtype):
    rows = dims["T"] * dims["H"] * dtype_bytes(dtype)
    w = world_size
    return [Phase("all_to_all", hbm_bytes=2 * rows, comm_bytes=(w - 1) / w * rows, unit="fp32")]


PROBLEM = Problem(
    id="moe_all2all_primitive",
    pkb_id=27,
    title="MoE all-to-all with uneven splits",
    level=1,
    parallelism="EP",
    origin="Megatron-LM / VeOmni expert parallelism",
    description=(
        "Every rank holds T token rows of width H in bf16 and per-destination split sizes that "
        "differ from rank to rank (input splits on the sender, matching output splits on the "
        "receiver). Send each block to its rank and return what arrives, concatenated in "
        "source-rank order. The token dispatch and combine of expert parallelism. Pure data "
        "movement, bit-exact; latency-bound for few tokens, NVLink-bound for many."
    ),
    shapes=(
        Shape("small", {"T": 16, "H": 64}),
        Shape("default", {"T": 1024, "H": 1024}, default=True),
        Shape("large", {"T": 8192, "H": 4096}),
    ),
    roofline=roofline,
    tolerance=BITWISE,
)
