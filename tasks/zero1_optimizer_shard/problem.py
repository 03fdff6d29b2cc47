"""ZeRO stage 1 training step: optimizer state sharded over data-parallel ranks.

Rank r holds its batch X (n, d_in) and targets y (n, d_out), the MLP parameters W1 (hid, d_in),
b1, W2 (d_out, hid), b2 (rank 0's are the model's; the broadcast must replace everyone else's),
its partition of the Adam state, exp_avg_part and exp_avg_sq_part (P/W each, the r-th slice of the
flattened [W1, b1, W2, b2] vector), and lr, beta1, beta2, eps, step. It returns the full updated
W1, b1, W2, b2 and its updated state partition, after one bias-corrected Adam step on the
rank-averaged gradient of the MSE loss of relu(X W1^T + b1) W2^T + b2. The reference all-reduces
the whole gradient and keeps its slice (ZeRO-1); P is a multiple of 8 so every W divides it.

Roofline per GPU, P parameters, e bytes per element, three phases:
1. broadcast of rank 0's parameters: P*e bytes over NVLink; HBM P*e.
2. forward + backward: 4n*d_in*hid + 6n*hid*d_out FLOPs on bf16 tensor cores; HBM reads X, y and
   the parameters and writes the gradients (P*e).
3. reduce-scatter + Adam + all-gather, pipelined slice by slice: only this rank's slice of the
   averaged gradient is needed, so a reduce-scatter ((W-1)/W * P*e) suffices, and the updated
   slices are all-gathered ((W-1)/W * P*e); HBM reads the gradients (P*e), the parameter slice and
   both state slices (3P/W*e), writes the state slices (2P/W*e) and the gathered parameters (P*e);
   13 FLOPs per slice element on CUDA cores.
The same outputs and the same roofline as zero2_optimizer_shard_grad: the two problems differ in
the reference's algorithm (all-reduce here, reduce-scatter there), not in what must be computed.
"""

from tasks.ddp.problem import (
    ADAM_FLOPS_PER_PARAM,
    EXP_AVG_SQ_TOLERANCE,
    EXP_AVG_TOLERANCE,
    PARAM_TOLERANCE,
    forward_backward_phase,
    mlp_params,
)
from tasks.spec import Phase, Problem, Shape, dtype_bytes


def zero_roofline(dims, world_size, dtype):
    p = mlp_params(dims)
    e, w = dtype_bytes(dtype), world_size
    part = p // w
    return [
        Phase("broadcast", hbm_bytes=p * e, comm_bytes=p * e, unit="fp32"),
        forward_backward_phase(dims, e),
        Phase(
            "reduce_scatter_adam_all_gather",
            flops=ADAM_FLOPS_PER_PARAM * part,
            hbm_bytes=(p + 3 * part + 2 * part + p) * e,
            comm_bytes=2 * (w - 1) / w * p * e,
            unit="fp32",
        ),
    ]


# Four parameter tensors, then the two state slices.
ZERO_TOLERANCES = (PARAM_TOLERANCE,) * 4 + (EXP_AVG_TOLERANCE, EXP_AVG_SQ_TOLERANCE)

ZERO_SHAPES = (
    Shape("small", {"n": 8, "d_in": 16, "hid": 32, "d_out": 8}),
    Shape("default", {"n": 256, "d_in": 256, "hid": 512, "d_out": 256}, default=True),
    Shape("large", {"n": 4096, "d_in": 4096, "hid": 8192, "d_out": 4096}),
)

PROBLEM = Problem(
    id="zero1_optimizer_shard",
    pkb_id=41,
    title="ZeRO-1 training step (sharded Adam state)",
    level=4,
    parallelism="DP",
    origin="DeepSpeed ZeRO stage 1",
    description=(
        "Every rank holds its batch, a copy of a two-layer MLP (rank 0's is authoritative) and its "
        "1/W slice of the Adam state. Broadcast the parameters, run forward and backward, average "
        "the gradients across ranks, update this rank's parameter slice with Adam, all-gather the "
        "updated parameters and return them with the updated state slice. NVLink-bound for small "
        "batches."
    ),
    shapes=ZERO_SHAPES,
    roofline=zero_roofline,
    tolerance=ZERO_TOLERANCES,
)
