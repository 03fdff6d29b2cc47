"""Scatter of a (W, M, N) bf16 tensor from a root rank: rank i receives slice i.

Roofline, B = M*N*e bytes per slice, W ranks, one phase:
- NVLink: the root holds the only copy of the W-1 slices the others need, so it sends at least
  (W-1) * B; sending each slice straight to its owner reaches that.
- HBM: the root reads all W slices and writes its own output slice: (W+1) * B.
- No arithmetic.
"""

from tasks.spec import BITWISE, Phase, Problem, Shape, dtype_bytes


def roofline(dims, world_size, dtype):
    b = dims["M"] * dims["N"] * dtype_bytes(dtype)
    w = world_size
    return [Phase("scatter", hbm_bytes=(w + 1) * b, comm_bytes=(w - 1) * b, unit="fp32")]


PROBLEM = Problem(
    id="scatter",
    pkb_id=5,
    title="Scatter",
    level=1,
    parallelism="collective",
    origin="NCCL / torch.distributed",
    description=(
        "Every rank knows the index `src` of a root rank (the same on all ranks, drawn at random per "
        "trial). The root holds a (W, M, N) bf16 tensor; every other rank holds an M x N tensor whose "
        "values are irrelevant. Every rank returns a new M x N tensor equal to the root's slice at its "
        "own rank index. Used to hand out work or data shards from one rank. Bound by the root's "
        "outgoing NVLink bandwidth at large sizes. Pure data movement: the result must be bit-exact."
    ),
    shapes=(
        Shape("small", {"M": 64, "N": 1024}),
        Shape("default", {"M": 1024, "N": 1024}, default=True),
        Shape("large", {"M": 8192, "N": 4096}),
    ),
    roofline=roofline,
    tolerance=BITWISE,
)
