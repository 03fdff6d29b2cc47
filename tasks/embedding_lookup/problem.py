"""Row-sharded embedding lookup: rank r holds rows [r*V, (r+1)*V) of a W*V x D table and T
indices into the whole table; it returns the T looked-up rows.

Roofline, e bytes per element, int64 indices, W ranks, one phase; indices are uniform over the
W*V rows, so the counts are expectations. A row needed twice is fetched once.
- NVLink: rank r needs the distinct rows its T indices name on the W-1 other shards. A row of a
  given remote shard is among them with probability p = 1 - (1 - 1/(W*V))^T, so the expected
  count is (W-1) * V * p rows of D*e bytes; by symmetry each GPU sends as much as it receives.
  Indices need not travel: a kernel can read remote rows directly (pull).
- HBM: read the T indices (8 bytes each); read each distinct row of the local shard that any
  rank asked for once, V * (1 - (1 - 1/(W*V))^(W*T)) rows of D*e bytes; write T*D*e.
- No arithmetic.
"""

from tasks.spec import BITWISE, Phase, Problem, Shape, dtype_bytes


def roofline(dims, world_size, dtype):
    v, d, t = dims["V"], dims["D"], dims["T"]
    e = dtype_bytes(dtype)
    w = world_size
    miss = 1.0 - 1.0 / (w * v)
    remote_rows = (w - 1) * v * (1.0 - miss**t)
    served_rows = v * (1.0 - miss ** (w * t))
    return [
        Phase(
            "lookup",
            hbm_bytes=t * dtype_bytes("int64") + served_rows * d * e + t * d * e,
            comm_bytes=remote_rows * d * e,
            unit="fp32",
        )
    ]


PROBLEM = Problem(
    id="embedding_lookup",
    pkb_id=10,
    title="Sharded embedding lookup",
    level=2,
    parallelism="TP",
    origin="TorchRec / Megatron-LM",
    description=(
        "Vocabulary-parallel embedding: rank r holds rows [r*V, (r+1)*V) of a (W*V) x D bf16 table "
        "as `local_shard`, and T int64 `indices` into the whole table (uniformly random). Return the "
        "T x D looked-up rows in the layout of the public suite: the indices grouped by the rank that "
        "owns them, in rank order, keeping their original order within each group (a stable sort by "
        "index // V). Vocabulary-parallel embeddings and sparse embedding tables (DLRM, TorchRec) "
        "do this fetch. Irregular point-to-point traffic; NVLink-bound at large sizes. Pure data "
        "movement: the result must be bit-exact."
    ),
    shapes=(
        Shape("small", {"V": 64, "D": 128, "T": 64}),
        Shape("default", {"V": 1024, "D": 1024, "T": 1024}, default=True),
        Shape("large", {"V": 32768, "D": 4096, "T": 8192}),
    ),
    roofline=roofline,
    tolerance=BITWISE,
)
