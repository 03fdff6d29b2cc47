"""Gradient clipping by global norm with expert-parallel (EP) gradients.

W ranks form an EP mesh: ep_size = max(1, W/2) ranks per EP group (consecutive ranks) and
W/ep_size ranks per EP-FSDP group (ranks with the same position in their EP group). Rank r holds
L non-expert gradient shards (FSDP over all ranks) and LE expert gradient shards, all bf16,
shapes (M, N) and (N, M) alternating, plus max_norm, norm_type = 2, ep_size and the three groups.
The expert gradients are first divided by ep_size in place (they were summed over EP ranks); the
global norm is the 2-norm of all non-expert shards (summed over the FSDP group) and all scaled
expert shards (summed over the EP-FSDP group, then the EP group). It returns that fp32 norm and,
since it exceeds max_norm (drawn between 0.25 and 0.75 of its expected value), scales every shard
in place by max_norm / norm. ep_size is a power of two, so dividing by it is exact in bf16.

Roofline per GPU, n = (L + LE)*M*N elements, e bytes per element, two phases:
1. norm: 2n FLOPs (fp32 CUDA cores; the 1/ep_size factor folds into the expert partial sum);
   HBM reads every shard (n*e); NVLink: both partial sums cover all W ranks, so one all-reduce of
   one fp32 value: 2(W-1)/W * 4 bytes.
2. scale: n FLOPs; HBM reads and writes every shard once (2n*e; the expert shards take both
   factors in one write) and writes the norm (4 bytes).
"""

from tasks.spec import Phase, Problem, Shape, Tolerance, dtype_bytes


def roofline(dims, world_size, dtype):
    n = (dims["L"] + dims["LE"]) * dims["M"] * dims["N"]
    e, w = dtype_bytes(dtype), world_size
    return [
        Phase("norm", flops=2 * n, hbm_bytes=n * e, comm_bytes=2 * (w - 1) / w * 4, unit="fp32"),
        Phase("scale", flops=n, hbm_bytes=2 * n * e + 4, unit="fp32"),
    ]


PROBLEM = Problem(
    id="clip_grad_norm_ep",
    pkb_id=22,
    title="Clip gradients by global norm (FSDP + expert parallelism)",
    level=2,
    parallelism="EP",
    origin="VeOmni (FSDP2 + EP gradient clipping)",
    description=(
        "Every rank holds non-expert gradient shards (FSDP over all ranks) and expert gradient "
        "shards (FSDP within its EP-FSDP group) in bf16. Divide the expert gradients by ep_size, "
        "compute the global L2 norm across all groups (fp32), scale every shard in place by "
        "max_norm / norm since it exceeds max_norm, and return the norm. HBM-bound: two passes "
        "over the gradients around scalar all-reduces over three process groups."
    ),
    shapes=(
        Shape("small", {"L": 2, "LE": 2, "M": 32, "N": 64}),
        Shape("default", {"L": 1, "LE": 1, "M": 1024, "N": 1024}, default=True),
        Shape("large", {"L": 4, "LE": 4, "M": 4096, "N": 4096}),
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
    mutates=(0, 1),
    inplace_results=(0, 1),
)
