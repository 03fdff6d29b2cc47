"""Cross-entropy over a vocabulary split across ranks (Megatron-LM's vocab-parallel loss).

Rank r holds logits (B, S, V/W) for vocabulary entries [r*V/W, (r+1)*V/W) of every token, and the
same targets (B, S) on every rank. Loss per token: log(sum over all V of exp(l - m)) - (l_t - m),
with m the token's maximum over the whole vocabulary and l_t its target's logit. Contract kept from
the public reference: the logits input is shifted in place by m (it is compared like an output).

Roofline per GPU, N = B*S tokens, e bytes per element, one phase: a tile of tokens can be read
once, its per-token statistics exchanged with the peers, and the tile (still on chip) shifted and
written back, so the exchanges pipeline with the streaming of the logits.
- FLOPs: per logit a compare for the maximum, a subtract, an exponential and an add:
  4*N*V/W, fp32 CUDA cores (the target pick and the log per token are negligible).
- HBM: read the logits and write them back shifted (2*N*V/W*e), read the int64 targets (8N),
  write the loss (N*e).
- NVLink: three per-token values are combined over the ranks (maximum, sum of exponentials,
  target logit; an online-softmax kernel exchanges local maxima and rescaled sums instead, the
  same amount): bandwidth-optimal all-reduces of 3N values, 2*(W-1)/W * 3N*e bytes.
HBM-bound at the default and large shapes at every world size: V/W logits per token cross HBM,
three numbers per token cross NVLink (the tiny CI shape is NVLink-bound at W = 8).
"""

from tasks.spec import Phase, Problem, Shape, Tolerance, dtype_bytes


def roofline(dims, world_size, dtype):
    n = dims["B"] * dims["S"]
    shard = dims["V"] // world_size
    e = dtype_bytes(dtype)
    w = world_size
    return [
        Phase(
            "max + sum of exponentials + target logit, allreduced",
            flops=4 * n * shard,
            hbm_bytes=2 * n * shard * e + n * dtype_bytes("int64") + n * e,
            comm_bytes=2 * (w - 1) / w * 3 * n * e,
            unit="fp32",
        )
    ]


PROBLEM = Problem(
    id="vocab_parallel_cross_entropy_loss",
    pkb_id=73,
    title="Vocab-parallel cross-entropy loss",
    level=2,
    parallelism="TP",
    origin="Megatron-LM (vocab-parallel cross-entropy)",
    description=(
        "The output vocabulary (V entries) is split across ranks: every rank holds vocab_parallel_logits "
        "(B, S, V/W), bf16, its contiguous slice [r*V/W, (r+1)*V/W), and the same target token ids "
        "(B, S), int64 in [0, V). Return the per-token cross-entropy loss (B, S), bf16, on every rank: "
        "log(sum of exp(logit - max)) - (target logit - max) over the whole vocabulary. Like Megatron-LM's "
        "vocab-parallel cross-entropy, it also shifts the logits input in place by each token's global "
        "maximum (checked as an output). Three all-reduces in the reference (max, target logit, sum of "
        "exponentials) that a fused kernel can combine into one exchange per token tile. HBM-bound: "
        "the logits are streamed, a few numbers per token cross NVLink."
    ),
    shapes=(
        Shape("small", {"B": 2, "S": 16, "V": 64}),
        Shape("default", {"B": 4, "S": 512, "V": 512}, default=True),
        Shape("large", {"B": 8, "S": 1024, "V": 512}),
    ),
    roofline=roofline,
    mutates=(0,),
    inplace_results=(0,),
    tolerance=Tolerance(
        atol=0.1,
        rtol=1e-2,
        reason=(
            "losses near log(V), 4 to 10: the bf16 reference (bf16 exponentials, sums and log) measured "
            "up to 0.0625 (one bf16 ulp at 8 to 16) from the same math in float64 or in fp32 rounded to "
            "bf16, small and default shapes at W=2, 4 and 8 (also with the sums in reverse rank order); atol "
            "0.1 + rtol 1e-2 admits at least 2.5x every error found. The shifted logits differ by at most "
            "half an ulp"
        ),
    ),
)
