"""Log-probabilities of target tokens under top-k/top-p filtering, from vocab-parallel logits,
chunked along the tokens (the memory-bounded form of vocab_parallel_log_prob_topk).

Inputs as in vocab_parallel_log_prob_topk, plus chunk_size: the reference handles B*chunk_size
consecutive tokens of the flattened (B*S) order at a time (about S/4, a multiple of W), so the
sequence-split logits of one chunk are all it holds. The result is the unchunked problem's,
(B, S) fp32 on every rank, whatever the chunking (none included). Same draws: no ties among a
token's K+1 largest logits, no softmax mass within 0.02 of top_p, targets always kept.

Roofline per GPU: the unchunked problem's (tasks/vocab_parallel_log_prob_topk/problem.py), since
chunking changes what is held at once, not what is read or sent: one phase, T = B*S tokens,
e = 2 bytes:
- FLOPs: T*V/W compares (fp32, CUDA cores);
- HBM: T*V/W*e logits + 8T targets + 4T results;
- NVLink: (W-1)/W * T*(K*e + 1) candidates to the token owners + (W-1)/W * 4T results gathered.
HBM-bound at every shape.
"""

from tasks.spec import Problem
from tasks.vocab_parallel_log_prob_topk.problem import LOG_PROB_TOLERANCE, SHAPES, log_prob_roofline

PROBLEM = Problem(
    id="vocab_parallel_log_prob_topk_chunked",
    pkb_id=83,
    title="Vocab-parallel log-probs under top-k/top-p, chunked",
    level=3,
    parallelism="TP",
    origin="verl (RL log-probs of sampled tokens under top-k/top-p)",
    description=(
        "Every rank holds vocab_parallel_logits (B, S, V/W) bf16, its vocabulary slice [r*V/W, (r+1)*V/W), "
        "the same target ids (B, S) int64, tp_group = None, top_k = K, top_p = 0.9 and chunk_size (about "
        "S/4, a multiple of W). Per token: keep the top_k largest logits over the whole vocabulary; sorted "
        "descending, keep those whose softmax mass (over the top_k) strictly above them is below top_p (the "
        "largest always). Return (B, S) fp32 on every rank: log_softmax over the kept logits at the target "
        "(-inf if dropped). The reference takes B*chunk_size tokens of the flattened order at a time "
        "(all-to-all into a sequence split, filter, all-gather) to bound its memory; the result does not "
        "depend on the chunking. The draws leave no ties among a token's K+1 largest logits and no mass "
        "within 0.02 of top_p; targets are always kept. HBM-bound (one read of the logits) at the default "
        "shape."
    ),
    shapes=SHAPES,
    roofline=log_prob_roofline,
    tolerance=LOG_PROB_TOLERANCE,
)
