"""Gather of one bf16 tensor per rank into a (W, M, N) tensor on a root rank.

Roofline, B = M*N*e bytes per rank, W ranks, one phase:
- NVLink: the root must receive the W-1 other tensors: (W-1) * B through its links (each other
  rank sends B). Links are full duplex with the same rate each way, so the root's incoming
  traffic bounds the time.
- HBM: the root reads its own tensor and writes the W*B output: (W+1) * B.
- No arithmetic.
"""

from tasks.spec import BITWISE, Phase, Problem, Shape, dtype_bytes


def roofline(dims, world_size, dtype):
    b = dims["M"] * dims["N"] * dtype_bytes(dtype)
    w = world_size
    return [Phase("gather", hbm_bytes=(w + 1) * b, comm_bytes=(w - 1) * b, unit="fp32")]


PROBLEM = Problem(
    id="gather",
    pkb_id=6,
    title="Gather",
    level=1,
    parallelism="collective",
    origin="NCCL / torch.distributed",
    description=(
        "Every rank holds an M x N bf16 tensor and the index `dst` of a root rank (the same on all "
        "ranks, drawn at random per trial). The root returns a (W, M, N) tensor stacking all ranks' "
        "tensors in rank order; every other rank returns its own tensor unchanged. Used to collect "
        "results for logging or evaluation on one rank. Bound by the root's incoming NVLink "
        "bandwidth at large sizes. Pure data movement: the result must be bit-exact."
    ),
    shapes=(
        Shape("small", {"M": 64, "N": 1024}),
        Shape("default", {"M": 1024, "N": 1024}, default=True),
        Shape("large", {"M": 8192, "N": 4096}),
    ),
    roofline=roofline,
    tolerance=BITWISE,
)
