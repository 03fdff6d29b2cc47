"""ZeRO stage 2 training step: optimizer state and gradients sharded over data-parallel ranks.

The inputs and outputs of zero1_optimizer_shard: rank r holds its batch, the MLP parameters (rank
0's are the model's), its slice exp_avg_part / exp_avg_sq_part (P/W each) of the Adam state of the
flattened [W1, b1, W2, b2] vector, and lr, beta1, beta2, eps, step; it returns the full updated
parameters and its updated state slice. The reference reduce-scatters the gradient so each rank
only ever holds its averaged slice (ZeRO-2). P is a multiple of 8.

Roofline: identical to zero1_optimizer_shard (its docstring derives it): broadcast (P*e over
NVLink), forward + backward (4n*d_in*hid + 6n*hid*d_out FLOPs), then reduce-scatter + Adam +
all-gather (2(W-1)/W * P*e over NVLink). The least any algorithm must do is the same for both
problems; only the reference differs.
"""

from tasks.spec import Problem
from tasks.zero1_optimizer_shard.problem import ZERO_SHAPES, ZERO_TOLERANCES, zero_roofline

PROBLEM = Problem(
    id="zero2_optimizer_shard_grad",
    pkb_id=42,
    title="ZeRO-2 training step (sharded Adam state and gradients)",
    level=4,
    parallelism="DP",
    origin="DeepSpeed ZeRO stage 2",
    description=(
        "Every rank holds its batch, a copy of a two-layer MLP (rank 0's is authoritative) and its "
        "1/W slice of the Adam state. Broadcast the parameters, run forward and backward, "
        "reduce-scatter the gradients so each rank gets its averaged slice, update that slice with "
        "Adam, all-gather the updated parameters and return them with the updated state slice. "
        "NVLink-bound for small batches."
    ),
    shapes=ZERO_SHAPES,
    roofline=zero_roofline,
    tolerance=ZERO_TOLERANCES,
)
