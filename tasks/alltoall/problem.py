"""All-to-all of a (W, M, N) bf16 tensor per rank: rank i's slice j goes to rank j's slice i.

Roofline, B = M*N*e bytes per slice, W ranks, one phase:
- NVLink: each rank's W-1 slices meant for others exist only on it: (W-1) * B sent (and
  received) per GPU.
- HBM: read the W*B input once, write the W*B output once: 2 * W * B.
- No arithmetic.
"""

from tasks.spec import BITWISE, Phase, Problem, Shape, dtype_bytes


def roofline(dims, world_size, dtype):
    b = dims["M"] * dims["N"] * dtype_bytes(dtype)
    w = world_size
    return [Phase("alltoall", hbm_bytes=2 * w * b, comm_bytes=(w - 1) * b, unit="fp32")]


PROBLEM = Problem(
    id="alltoall",
    pkb_id=8,
    title="All-to-all",
    level=1,
    parallelism="collective",
    origin="NCCL / torch.distributed",
    description=(
        "Every rank holds a (W, M, N) bf16 tensor whose slice j is addressed to rank j; return a "
        "(W, M, N) tensor whose slice j is the slice rank j addressed to this rank. The exchange "
        "behind expert-parallel token dispatch and Ulysses sequence/head re-sharding. NVLink-bound "
        "at large sizes. Pure data movement: the result must be bit-exact."
    ),
    shapes=(
        Shape("small", {"M": 64, "N": 1024}),
        Shape("default", {"M": 1024, "N": 1024}, default=True),
        Shape("large", {"M": 4096, "N": 4096}),
    ),
    roofline=roofline,
    tolerance=BITWISE,
)
