"""Sum-reduction of one bf16 tensor per rank onto a root rank.

Roofline, B = M*N*e bytes, W ranks, one phase:
- NVLink: the root cannot form the sum without receiving at least one value per element: B.
  That bound is reachable: the W-1 other ranks reduce-scatter among themselves and each sends
  its reduced 1/(W-1) to the root (each sends (W-2)/(W-1) * B + B/(W-1) = B), or a pipelined
  chain. Busiest GPU: B.
- HBM: the root reads its tensor and writes the result: 2B; the others read B.
- FLOPs: (W-1) * M*N additions in all, (W-1)/W * M*N per GPU, fp32 on CUDA cores; negligible.
"""

from tasks.allreduce.problem import SUM_TOLERANCE
from tasks.spec import Phase, Problem, Shape, dtype_bytes


def roofline(dims, world_size, dtype):
    n = dims["M"] * dims["N"]
    b = n * dtype_bytes(dtype)
    w = world_size
    return [Phase("reduce", flops=(w - 1) / w * n, hbm_bytes=2 * b, comm_bytes=b, unit="fp32")]


PROBLEM = Problem(
    id="reduce",
    pkb_id=4,
    title="Reduce",
    level=1,
    parallelism="collective",
    origin="NCCL / torch.distributed",
    description=(
        "Every rank holds an M x N bf16 tensor and the index `dst` of a root rank (the same on all "
        "ranks, drawn at random per trial). The root returns the element-wise sum over all ranks; "
        "every other rank returns its own tensor unchanged. Used to collect gradients or metrics "
        "on one rank. Large sizes are bound by the root's incoming NVLink bandwidth."
    ),
    shapes=(
        Shape("small", {"M": 64, "N": 1024}),
        Shape("default", {"M": 1024, "N": 1024}, default=True),
        Shape("large", {"M": 8192, "N": 8192}),
    ),
    roofline=roofline,
    tolerance=SUM_TOLERANCE,
)
