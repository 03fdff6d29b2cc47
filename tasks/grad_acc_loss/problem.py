"""Token-weighted loss normalisation across data-parallel ranks (gradient accumulation), forward
and backward.

Rank r holds its mean loss (bf16 scalar), its count of valid tokens and the global count (int64
scalars), and the upstream gradients of the two outputs (bf16 scalars). It returns
- loss_sum = all-reduce over ranks of loss * local_valid_tokens (a rank with no valid tokens has
  a NaN mean loss, which counts as 0),
- normalized_loss = loss_sum / global_valid_tokens,
- grad_loss = grad_normalized * local / global + grad_loss_sum * local,
all bf16 scalars. Token counts are random up to M*N per rank and about a quarter of the ranks
(never all) have none; global_valid_tokens is their sum.

Roofline per GPU, e bytes per element, one phase: NVLink carries one all-reduce of one scalar,
2(W-1)/W * e bytes; HBM reads the five inputs (3e + 16 bytes) and writes three scalars (3e);
about six FLOPs. Every shape is latency-bound: the problem measures the cost of a scalar
all-reduce and the kernels around it; M and N only set the size of the token counts.
"""

from tasks.spec import Phase, Problem, Shape, Tolerance, dtype_bytes


def roofline(dims, world_size, dtype):
    e, w = dtype_bytes(dtype), world_size
    return [Phase("allreduce", flops=6, hbm_bytes=3 * e + 16 + 3 * e, comm_bytes=2 * (w - 1) / w * e, unit="fp32")]


PROBLEM = Problem(
    id="grad_acc_loss",
    pkb_id=23,
    title="Token-weighted loss across data-parallel ranks",
    level=2,
    parallelism="DP",
    origin="VeOmni (gradient-accumulation loss normalisation)",
    description=(
        "Every rank holds its mean loss, its number of valid tokens, the global number and the "
        "upstream gradients of the two outputs, all scalars. Return the token-weighted loss sum "
        "(all-reduced), the loss normalised by the global token count, and the gradient of the "
        "local loss. A rank without valid tokens contributes zero despite its NaN loss. Pure "
        "latency: one scalar all-reduce and a handful of flops."
    ),
    shapes=(
        Shape("small", {"M": 4, "N": 4}),
        Shape("default", {"M": 1024, "N": 1024}, default=True),
        Shape("large", {"M": 16384, "N": 4096}),
    ),
    roofline=roofline,
    tolerance=Tolerance(
        atol=1e-6,
        rtol=2e-2,
        reason="bf16 scalars: bf16 reference vs fp64 within 0.5% relative (all shapes, W=2 and 4); 4x margin. "
        "Outputs are 0 only on ranks without tokens, where every correct order gives exactly 0",
    ),
)
