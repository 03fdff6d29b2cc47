"""FSDP training step end to end: parameters and AdamW state sharded over data-parallel ranks.

The model is a two-layer MLP, W1 (hid, d_in), b1, W2 (d_out, hid), b2, flattened in that order
into P parameters (a multiple of 8, so every W divides it). Rank r holds its batch X (n, d_in) and
targets y (n, d_out), flat_param_shard, the r-th 1/W slice of the flat parameters, param_shapes
(the four shapes), its slices exp_avg_shard and exp_avg_sq_shard of the Adam state, and lr,
beta1, beta2, eps, weight_decay, step. It returns (theta, m, v), its updated slices after one
bias-corrected AdamW step (decoupled weight decay lr*wd*theta on the old parameters) on the
rank-averaged gradient of the MSE loss of relu(X W1^T + b1) W2^T + b2. The reference all-gathers
the parameters, runs forward and backward, and reduce-scatters the gradient.

Roofline per GPU, P parameters, e bytes per element, three phases:
1. all-gather of the parameters: (W-1)/W * P*e bytes over NVLink; HBM reads the shard (P/W*e)
   and writes the whole (P*e).
2. forward + backward: 4n*d_in*hid + 6n*hid*d_out FLOPs on bf16 tensor cores; HBM reads X, y and
   the parameters and writes the gradients (P*e).
3. reduce-scatter + AdamW: (W-1)/W * P*e over NVLink; HBM reads the gradients (P*e), the
   parameter and state slices (3P/W*e) and writes the three updated slices (3P/W*e); 15 FLOPs per
   slice element (Adam's 13 and the decay) on CUDA cores.
"""

from dataclasses import replace

from tasks.ddp.problem import (
    ADAM_FLOPS_PER_PARAM,
    EXP_AVG_SQ_TOLERANCE,
    EXP_AVG_TOLERANCE,
    PARAM_TOLERANCE,
    forward_backward_phase,
    mlp_params,
)
from tasks.spec import Phase, Problem, Tolerance, dtype_bytes
from tasks.zero1_optimizer_shard.problem import ZERO_SHAPES

ADAMW_FLOPS_PER_PARAM = ADAM_FLOPS_PER_PARAM + 2


def roofline(dims, world_size, dtype):
    p = mlp_params(dims)
    e, w = dtype_bytes(dtype), world_size
    part = p // w
    return [
        Phase("all_gather", hbm_bytes=(part + p) * e, comm_bytes=(w - 1) / w * p * e, unit="fp32"),
        forward_backward_phase(dims, e),
        Phase("reduce_scatter_adamw", flops=ADAMW_FLOPS_PER_PARAM * part, hbm_bytes=(p + 6 * part) * e,
              comm_bytes=(w - 1) / w * p * e, unit="fp32"),
    ]


PROBLEM = Problem(
    id="fsdp_step_e2e",
    pkb_id=47,
    title="FSDP training step (sharded parameters and AdamW state)",
    level=4,
    parallelism="DP",
    origin="PyTorch FullyShardedDataParallel",
    description=(
        "Fully sharded data parallelism: every rank holds its batch X (n, d_in), targets y (n, d_out), the r-th "
        "1/W slice of a two-layer MLP's flat parameters [W1 (hid, d_in), b1, W2 (d_out, hid), b2] (param_shapes "
        "gives the four shapes) and its slices of the Adam state. The call is solution(X, y, flat_param_shard, "
        "param_shapes, exp_avg_shard, exp_avg_sq_shard, lr, beta1, beta2, eps, weight_decay, step). All-gather the "
        "parameters, run forward and backward of the MSE loss of relu(X W1^T + b1) W2^T + b2, reduce-scatter "
        "and average the gradient over ranks, apply one bias-corrected AdamW step (decoupled decay lr*wd times "
        "the old parameters) to this rank's slice, and return (theta, exp_avg, exp_avg_sq), each (P/W,) bf16. "
        "NVLink-bound at the default shape (the gather and scatter of the model outweigh its small batch)."
    ),
    shapes=ZERO_SHAPES,
    roofline=roofline,
    # The same MLP, bf16 gradients and Adam arithmetic as ddp and zero1_optimizer_shard, whose tolerances were
    # measured; the decoupled decay adds lr*wd*theta (<= 1e-3 * |theta|), one more bf16 rounding.
    tolerance=(
        Tolerance(atol=1e-4, rtol=1e-2, reason="measured for ddp (the same bf16 path): " + PARAM_TOLERANCE.reason + "; decay term: one more bf16 rounding "
                  "within rtol"),
        replace(EXP_AVG_TOLERANCE, reason="measured for ddp (the same bf16 moment arithmetic): " + EXP_AVG_TOLERANCE.reason),
        replace(EXP_AVG_SQ_TOLERANCE, reason="measured for ddp (the same bf16 moment arithmetic): "
                + EXP_AVG_SQ_TOLERANCE.reason),
    ),
)
