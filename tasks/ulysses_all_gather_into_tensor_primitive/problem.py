"""Ulysses all-gather primitive: concatenate every rank's (M, N) tensor along dim 0.

Rank r holds x (M, N); every rank returns (W*M, N) with rank s's x in rows [s*M, (s+1)*M).

Roofline, B = M*N*e bytes per rank, W ranks, one phase:
- NVLink: every other rank needs this rank's B bytes: (W-1) * B bytes sent per GPU (direct to
  each peer, or relayed in a ring: the same count).
- HBM: read x once (B), write the (W*M, N) output once (W*B).
- No arithmetic.
"""

from tasks.spec import BITWISE, Phase, Problem, Shape, dtype_bytes


def roofline(dims, world_size, dtype):
    b = dims["M"] * dims["N"] * dtype_bytes(dtype)
    w = world_size
    return [Phase("all_gather", hbm_bytes=b + w * b, comm_bytes=(w - 1) * b, unit="fp32")]


PROBLEM = Problem(
    id="ulysses_all_gather_into_tensor_primitive",
    pkb_id=34,
    title="Ulysses all-gather into one tensor",
    level=1,
    parallelism="SP",
    origin="DeepSpeed-Ulysses (VeOmni)",
    description=(
        "Every rank holds an M x N bf16 tensor; return the (W*M) x N concatenation of all ranks' "
        "tensors along dim 0, in rank order, on every rank. Ulysses uses it to rebuild a full "
        "sequence from sequence shards (for example position ids or a replicated activation). "
        "Pure data movement, bit-exact; bound by latency when small and by NVLink when large."
    ),
    shapes=(
        Shape("small", {"M": 64, "N": 256}),
        Shape("default", {"M": 1024, "N": 1024}, default=True),
        Shape("large", {"M": 8192, "N": 4096}),
    ),
    roofline=roofline,
    tolerance=BITWISE,
)
