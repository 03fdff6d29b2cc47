"""Ulysses all-to-all primitive: scatter one dimension of a 2-D tensor over the ranks and gather
another.

Each rank holds x (M, N). With (scatter_dim, gather_dim) = (0, 1) rank r returns (M/W, W*N): row
block r of every rank's x, concatenated along columns in rank order; (1, 0) is the transpose of
that layout, (W*M, N/W). M and N are multiples of 8, so every W in (2, 4, 8) divides them.

Roofline, B = M*N*e bytes per rank (e bytes per element), W ranks, one phase:
- NVLink: W-1 of the W blocks of x belong to other ranks and each must leave this GPU once:
  (W-1)/W * B bytes sent per GPU.
- HBM: read x once, write the output (also B bytes) once: 2B.
- No arithmetic.
"""

from tasks.spec import BITWISE, Phase, Problem, Shape, dtype_bytes


def roofline(dims, world_size, dtype):
    b = dims["M"] * dims["N"] * dtype_bytes(dtype)
    w = world_size
    return [Phase("all_to_all", hbm_bytes=2 * b, comm_bytes=(w - 1) / w * b, unit="fp32")]


PROBLEM = Problem(
    id="ulysses_all_to_all_tensor_primitive",
    pkb_id=33,
    title="Ulysses all-to-all (scatter one dim, gather another)",
    level=1,
    parallelism="SP",
    origin="DeepSpeed-Ulysses (VeOmni)",
    description=(
        "Every rank holds an M x N bf16 tensor and two dimension indices. Split the scatter dimension "
        "into W equal blocks, send block i to rank i, and concatenate what arrives along the gather "
        "dimension in rank order. This is the collective under every Ulysses sequence-parallel "
        "layout change (sequence-sharded to head-sharded and back). Pure data movement, bit-exact; "
        "small tensors are latency-bound, large ones bound by NVLink bandwidth."
    ),
    shapes=(
        Shape("small-transposed", {"M": 64, "N": 256, "scatter_dim": 1, "gather_dim": 0}),
        Shape("default", {"M": 1024, "N": 1024, "scatter_dim": 0, "gather_dim": 1}, default=True),
        Shape("large", {"M": 8192, "N": 8192, "scatter_dim": 0, "gather_dim": 1}),
    ),
    roofline=roofline,
    tolerance=BITWISE,
)
