"""Log-probabilities of target tokens under top-k/top-p filtering, from vocab-parallel logits
(the sampler's log-probs of RL rollouts, as in verl / veRL-style trainers).

Rank r holds logits (B, S, V/W) bf16 for vocabulary entries [r*V/W, (r+1)*V/W) of every token,
the same targets (B, S) int64 on every rank, top_k = K and top_p = 0.9. Per token: keep the K
largest logits; sorted descending, keep those whose softmax mass (over the K) strictly above them
is below top_p (the largest always); return log_softmax over the kept logits, in fp32, at the
target, -inf where the target is not kept: (B, S) fp32 on every rank.

Ties and the top-p boundary: the draws give each token K distinct largest logits (3 + m/8, exact
in bf16) above the rest of its vocabulary, and redraw a token whenever a mass above a candidate
lies within 0.02 of top_p, so every honest order of the softmax and prefix sum, in bf16 or
wider, keeps the same tokens. Targets are drawn among the kept tokens.

Roofline per GPU, T = B*S tokens, e = 2 bytes (bf16), one phase (a tile of tokens is scanned while
the previous tile's candidates cross NVLink):
- FLOPs: one compare per logit against the running K-th largest, T*V/W on CUDA cores (fp32); the
  softmax over the W*K candidates of a token is negligible.
- HBM: read the logits once (T*V/W*e), the int64 targets (8T), write the fp32 result (4T).
- NVLink: each rank sends its K local candidates of every token to the rank that owns the token
  (T/W tokens each), with one byte naming the target among them when this rank holds it:
  (W-1)/W * T*(K*e + 1); then the all-gather of the fp32 log-probs, (W-1)/W * 4T.
HBM-bound at every shape: V/W logits per token cross HBM, about K numbers per token cross NVLink.
"""

from tasks.spec import Phase, Problem, Shape, Tolerance, dtype_bytes


def log_prob_roofline(dims, world_size, dtype):
    t, v, k = dims["B"] * dims["S"], dims["V"], dims["K"]
    w, e = world_size, dtype_bytes(dtype)
    return [
        Phase(
            "local top-k + candidates to token owners + log-prob + all_gather",
            flops=t * v // w,
            hbm_bytes=t * v // w * e + 8 * t + 4 * t,
            comm_bytes=(w - 1) / w * t * (k * e + 1) + (w - 1) / w * 4 * t,
            unit="fp32",
        )
    ]


SHAPES = (
    # The public suite's size (M = 1024): 2 x 8 tokens, a 256-entry vocabulary, top-10.
    Shape("small", {"B": 2, "S": 8, "V": 256, "K": 10}),
    Shape("default", {"B": 2, "S": 512, "V": 16384, "K": 10}, default=True),
    Shape("large", {"B": 4, "S": 2048, "V": 32768, "K": 10}),
)

LOG_PROB_TOLERANCE = Tolerance(
    atol=3e-6,
    rtol=1e-6,
    reason=(
        "fp32 log-probs of exact bf16 logits (-3.2 to 0): the reference (top-k, fp32 logsumexp of the kept) "
        "measured up to 6.1e-7 from the same maths in float64, and the public reference (bf16 top-p softmax, "
        "fp32 log_softmax over the vocabulary) 2.2e-7, small (3 draws) and default shapes at W=2 and 4; the "
        "error follows the log-sum-exp's magnitude (logits up to 8, one fp32 step 9.5e-7), not the output's. "
        "atol 3e-6 is 2.5x two such errors apart; a log-softmax in bf16 is off by 1e-2 and fails"
    ),
)

PROBLEM = Problem(
    id="vocab_parallel_log_prob_topk",
    pkb_id=82,
    title="Vocab-parallel log-probs under top-k/top-p",
    level=3,
    parallelism="TP",
    origin="verl (RL log-probs of sampled tokens under top-k/top-p)",
    description=(
        "Every rank holds vocab_parallel_logits (B, S, V/W) bf16, its vocabulary slice [r*V/W, (r+1)*V/W), "
        "the same target ids (B, S) int64 in [0, V), tp_group = None, top_k = K and top_p = 0.9. Per token: "
        "keep the top_k largest logits over the whole vocabulary; sorted descending, keep those whose "
        "softmax mass (over the top_k) strictly above them is below top_p (the largest always). Return "
        "(B, S) fp32 on every rank: log_softmax over the kept logits at the target (-inf if the target is "
        "dropped). The draws leave no ties among a token's K+1 largest logits and no mass within 0.02 of "
        "top_p, so the kept set is unique; targets are always kept. The reference all-to-alls the logits "
        "into a sequence split, filters and all-gathers the result; exchanging K candidates per token "
        "instead moves a few bytes per token. HBM-bound (one read of the logits) at the default shape."
    ),
    shapes=SHAPES,
    roofline=log_prob_roofline,
    tolerance=LOG_PROB_TOLERANCE,
)
