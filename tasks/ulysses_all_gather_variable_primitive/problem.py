"""Ulysses all-gather of a tensor whose size is learnt at run time.

Rank r holds x (rows, N) and gather_dim = 0; every rank returns the (W*rows, N) concatenation of
all ranks' x along dim 0, in rank order. `rows` is drawn afresh for every call, uniform in
[M - M/2, M + M/2] (mean M) and the same on every rank: a solution cannot size its buffers once,
and must learn the size from its input (the public reference all-gathers every rank's shape
before the data, which also lets ranks differ; gloo's all-gather refuses lists of unequal
tensors, so the draws keep ranks equal, as the public suite's inputs do).

Roofline, B = M*N*e bytes per rank on average, W ranks, one phase (the shape exchange is W-1
messages of a few bytes, latency only, and is left out):
- NVLink: every other rank needs this rank's B bytes: (W-1) * B sent per GPU.
- HBM: read x once (B), write the output once (W*B).
- No arithmetic.
"""

from tasks.spec import BITWISE, Phase, Problem, Shape, dtype_bytes


def roofline(dims, world_size, dtype):
    b = dims["M"] * dims["N"] * dtype_bytes(dtype)
    w = world_size
    return [Phase("all_gather", hbm_bytes=b + w * b, comm_bytes=(w - 1) * b, unit="fp32")]


PROBLEM = Problem(
    id="ulysses_all_gather_variable_primitive",
    pkb_id=35,
    title="Ulysses all-gather of a run-time-sized tensor",
    level=1,
    parallelism="SP",
    origin="DeepSpeed-Ulysses (VeOmni)",
    description=(
        "Every rank holds x, a (rows, N) bf16 tensor, and gather_dim = 0 (then group = None). Return the "
        "(W*rows, N) concatenation of all ranks' x along gather_dim, in rank order, on every rank. "
        "rows changes from call to call (uniform in [M/2, 3M/2], equal on every rank), so buffers "
        "cannot be sized in advance; the reference exchanges shapes with one all-gather and the data "
        "with another. Ulysses uses it to rebuild variable-length sequences from their shards. Pure "
        "data movement, bit-exact; NVLink-bound at the default and large shapes."
    ),
    shapes=(
        Shape("small", {"M": 16, "N": 64}),
        Shape("default", {"M": 1024, "N": 1024}, default=True),
        Shape("large", {"M": 8192, "N": 4096}),
    ),
    roofline=roofline,
    tolerance=BITWISE,
)
