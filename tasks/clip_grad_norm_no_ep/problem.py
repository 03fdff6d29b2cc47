"""Gradient clipping by global norm over FSDP-sharded gradients.

Rank r holds L gradient shards in bf16 (shapes (M, N) and (N, M) alternating), max_norm,
norm_type = 2 and the FSDP process group (all ranks). It returns the global 2-norm of all ranks'
gradients (fp32 scalar) and, when that norm exceeds max_norm, scales its shards in place by
max_norm / norm. max_norm is drawn between 0.25 and 0.75 of the expected norm, so clipping always
happens and the in-place update is part of the contract.

Roofline per GPU, n = L*M*N elements, e bytes per element, two phases (no shard can be scaled
before the global norm is known):
1. norm: one square and one add per element (2n FLOPs, fp32 on CUDA cores); HBM reads the shards
   (n*e); NVLink: an all-reduce of one fp32 partial sum, 2(W-1)/W * 4 bytes (latency-bound).
2. scale: one multiply per element (n FLOPs); HBM reads and writes the shards again (2n*e) and
   writes the norm (4 bytes).
"""

from tasks.spec import Phase, Problem, Shape, Tolerance, dtype_bytes


def roofline(dims, world_size, dtype):
    n = dims["L"] * dims["M"] * dims["N"]
    e, w = dtype_bytes(dtype), world_size
    return [
        Phase("norm", flops=2 * n, hbm_bytes=n * e, comm_bytes=2 * (w - 1) / w * 4, unit="fp32"),
        Phase("scale", flops=n, hbm_bytes=2 * n * e + 4, unit="fp32"),
    ]


PROBLEM = Problem(
    id="clip_grad_norm_no_ep",
    pkb_id=21,
    title="Clip gradients by global norm (FSDP)",
    level=2,
    parallelism="DP",
    origin="VeOmni (FSDP2 gradient clipping)",
    description=(
        "Every rank holds its FSDP shards of L gradient tensors in bf16. Compute the global L2 norm "
        "over all ranks' shards (fp32), and since it exceeds max_norm, scale every local shard in "
        "place by max_norm / norm; return the norm. Run once per training step; HBM-bound (two "
        "passes over the gradients around one scalar all-reduce)."
    ),
    shapes=(
        Shape("small", {"L": 3, "M": 32, "N": 64}),
        Shape("default", {"L": 3, "M": 1024, "N": 1024}, default=True),
        Shape("large", {"L": 8, "M": 4096, "N": 4096}),
    ),
    roofline=roofline,
    tolerance=(
        Tolerance(
            atol=0.0,
            rtol=1e-3,
            reason="the fp32 norm of the bf16 reference differs from an fp64 sum by up to 4e-5 relative (default "
            "shape, W=2 and 8); 25x margin for other summation orders",
        ),
        Tolerance(
            atol=1e-6,
            rtol=1e-2,
            reason="the gradients scaled in place (checked after the call): one bf16 rounding of the product, at "
            "most 2^-8 relative; bf16 reference vs fp64 needs no atol at rtol 1e-2 (default shape, W=4)",
        ),
    ),
    mutates=(0,),
    inplace_results=(0,),
)
