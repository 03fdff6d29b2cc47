"""Broadcast of one bf16 tensor from a root rank to every rank.

Roofline, B = M*N*e bytes (e = bytes per element), W ranks, one phase:
- NVLink: every byte must leave the root at least once, so the root sends at least B. Sending
  each of the W-1 peers a different 1/(W-1) of the tensor and letting the peers exchange their
  pieces reaches that bound (a peer forwards (W-2)/(W-1) * B), so the busiest GPU sends B.
- HBM: the root reads its tensor and writes its output copy: 2B (a peer writes B and reads back
  less than B to forward).
- No arithmetic.
"""

from tasks.spec import BITWISE, Phase, Problem, Shape, dtype_bytes


def roofline(dims, world_size, dtype):
    b = dims["M"] * dims["N"] * dtype_bytes(dtype)
    return [Phase("broadcast", hbm_bytes=2 * b, comm_bytes=b, unit="fp32")]


PROBLEM = Problem(
    id="broadcast",
    pkb_id=3,
    title="Broadcast",
    level=1,
    parallelism="collective",
    origin="NCCL / torch.distributed",
    description=(
        "Every rank holds an M x N bf16 tensor and the index `src` of a root rank (the same on all "
        "ranks, drawn at random per trial); return a new tensor equal to the root's on every rank. "
        "The other ranks' tensors must not influence the result. Used to distribute initial weights "
        "and to replicate decisions made on one rank. Small sizes are latency-bound, large ones are "
        "bound by the root's NVLink bandwidth. Pure data movement: the result must be bit-exact."
    ),
    shapes=(
        Shape("small", {"M": 64, "N": 1024}),
        Shape("default", {"M": 1024, "N": 1024}, default=True),
        Shape("large", {"M": 8192, "N": 8192}),
    ),
    roofline=roofline,
    tolerance=BITWISE,
)
