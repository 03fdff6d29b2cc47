"""Reduce-scatter (sum) of a (W*M, N) bf16 tensor per rank: rank i gets rows [i*M, (i+1)*M) of
the sum over ranks.

Roofline, B = M*N*e bytes per output, W ranks, one phase:
- NVLink: every rank needs one partial value per output element from each of the W-1 others
  (or one combined value from a chain, which moves the same count): (W-1) * B sent per GPU,
  the (W-1)/W share of the W*B input that a bandwidth-optimal reduce-scatter sends.
- HBM: read the W*B input once, write the B output: (W+1) * B.
- FLOPs: (W-1) * M*N additions per GPU, fp32 on CUDA cores; negligible.
"""

from tasks.allreduce.problem import SUM_TOLERANCE
from tasks.spec import Phase, Problem, Shape, dtype_bytes


def roofline(dims, world_size, dtype):
    n = dims["M"] * dims["N"]
    b = n * dtype_bytes(dtype)
    w = world_size
    return [Phase("reducescatter", flops=(w - 1) * n, hbm_bytes=(w + 1) * b, comm_bytes=(w - 1) * b, unit="fp32")]


PROBLEM = Problem(
    id="reducescatter",
    pkb_id=7,
    title="Reduce-scatter",
    level=1,
    parallelism="collective",
    origin="NCCL / torch.distributed",
    description=(
        "Every rank holds a (W*M) x N bf16 tensor; rank i returns the M x N block of rows "
        "[i*M, (i+1)*M) of the element-wise sum over all ranks. The first half of a bandwidth-optimal "
        "all-reduce, and the gradient step of ZeRO/FSDP and of sequence-parallel row linear layers. "
        "Latency-bound when small, NVLink-bound when large."
    ),
    shapes=(
        Shape("small", {"M": 64, "N": 1024}),
        Shape("default", {"M": 1024, "N": 1024}, default=True),
        Shape("large", {"M": 8192, "N": 4096}),
    ),
    roofline=roofline,
    tolerance=SUM_TOLERANCE,
)
