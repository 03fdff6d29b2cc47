"""All-gather of one bf16 tensor per rank into a (W, M, N) tensor on every rank.

Roofline, B = M*N*e bytes per rank, W ranks, one phase:
- NVLink: each GPU must receive the W-1 other shards; by symmetry it sends (W-1) * B bytes
  (its shard to every peer, or relayed in a ring: the same count).
- HBM: read the local shard once (B), write the W*B output once.
- No arithmetic.
"""

from tasks.spec import BITWISE, Phase, Problem, Shape, dtype_bytes


def roofline(dims, world_size, dtype):
    b = dims["M"] * dims["N"] * dtype_bytes(dtype)
    w = world_size
    return [Phase("allgather", hbm_bytes=b + w * b, comm_bytes=(w - 1) * b, unit="fp32")]


PROBLEM = Problem(
    id="allgather",
    pkb_id=2,
    title="All-gather",
    level=1,
    parallelism="collective",
    origin="NCCL / torch.distributed",
    description=(
        "Every rank holds an M x N bf16 shard; return a (W, M, N) tensor stacking all shards in rank "
        "order, on every rank. Used to unshard parameters (FSDP, ZeRO-3) and to gather sequence "
        "shards. Pure data movement, so the result must be bit-exact."
    ),
    shapes=(
        Shape("small", {"M": 64, "N": 1024}),
        Shape("default", {"M": 1024, "N": 1024}, default=True),
        Shape("large", {"M": 8192, "N": 4096}),
    ),
    roofline=roofline,
    world_sizes=(1, 2, 4, 8),
    tolerance=BITWISE,
)
