"""The gradient all-reduce ending the backward pass of a LoRA-adapted expert grouped GEMM.

In LoRA fine-tuning of an expert-parallel MoE (VeOmni's EP group GEMM with LoRA), the frozen
experts need no gradient and only the adapters train. With the adapters replicated over the
data-parallel ranks, each rank's backward pass leaves its own partial gradients of the three
adapter matrices, which are summed over the ranks before the optimizer step. Every rank holds
grad_fc1_1_lora_A (R, N) and grad_fc1_2_lora_A (R, N) (the A matrices of the gate and up
projections) and grad_fc2_lora_B (N, R) (the B matrix of the down projection), R = 8 in bf16; the
solution sums each over all ranks and returns the three; it may sum in place (the reference does
and returns the same tensors), only the returned tensors are compared.

Roofline per GPU, e bytes per element, B = 3*R*N*e bytes per rank in all, one phase:
- NVLink: a bandwidth-optimal all-reduce (reduce-scatter then all-gather; the three tensors can
  travel as one buffer) sends 2*(W-1)/W * B bytes per GPU.
- HBM: each gradient read once and written once, 2*B.
- FLOPs: (W-1)/W * 3*R*N additions in fp32 on CUDA cores, negligible.
At the default shape (N = 1024) B is 48 KiB: the transfer (72 KiB over NVLink at W = 4, about
0.16 us at 450 GB/s) is far below the latency of one round of signals between GPUs, so the
problem is latency-bound in practice; the roofline's bound resource is NVLink. Fusing the three
all-reduces into one saves two rounds of latency.
"""

from tasks.allreduce.problem import SUM_TOLERANCE
from tasks.spec import Phase, Problem, Shape, dtype_bytes


def roofline(dims, world_size, dtype) -> list[Phase]:
    n = 3 * dims["R"] * dims["N"]
    b = n * dtype_bytes(dtype)
    w = world_size
    return [Phase("allreduce", flops=(w - 1) / w * n, hbm_bytes=2 * b, comm_bytes=2 * (w - 1) / w * b, unit="fp32")]


PROBLEM = Problem(
    id="moe_epgroupgemm_lora_backward",
    pkb_id=30,
    title="LoRA gradient all-reduce of an expert grouped GEMM backward",
    level=2,
    parallelism="DP",
    origin="VeOmni EP group GEMM with LoRA",
    description=(
        "Every rank holds its partial gradients of the three LoRA adapter matrices of an expert "
        "grouped GEMM, in bf16: grad_fc1_1_lora_A (R, N), grad_fc1_2_lora_A (R, N) and grad_fc2_lora_B "
        "(N, R) with R = 8, then group = None. Sum each over all ranks and return the three summed "
        "tensors; summing in place into the inputs is allowed (the reference does), not required. Three small all-reduces: latency-bound in "
        "practice (the data is tens of KiB), NVLink-bound on the roofline; one fused all-reduce saves "
        "two rounds."
    ),
    shapes=(
        Shape("small", {"R": 8, "N": 64}),
        Shape("default", {"R": 8, "N": 1024}, default=True),
        Shape("large", {"R": 8, "N": 8192}),
    ),
    roofline=roofline,
    tolerance=(SUM_TOLERANCE, SUM_TOLERANCE, SUM_TOLERANCE),
    mutates=(0, 1, 2),
)
