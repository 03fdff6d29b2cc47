"""Backward of the chunked vocab-parallel log-probs under top-k/top-p: the gradient with respect
to the vocab-parallel logits.

Inputs as in vocab_parallel_log_prob_topk_chunked, with grad_output (B, S) bf16 (the same on every
rank) after the targets. Per token, with the kept set of the forward (the K largest logits, then
those whose softmax mass above them, descending, is below top_p) and p = softmax over the kept
logits: grad = grad_output * (1[v = target] - p_v) on kept entries v, 0 on the others; rank r
returns its vocabulary slice, (B, S, V/W) fp32. The chunking (B*chunk_size tokens at a time) bounds
the reference's memory and does not change the result. Same draws as the forward: no ties among a
token's K+1 largest logits, no softmax mass within 0.02 of top_p, targets always kept.

Roofline per GPU, T = B*S tokens, e = 2 bytes, one phase (a tile of tokens is read, its
candidates and then its two statistics cross NVLink, and its gradient is written while the next
tile streams in; the tile stays on chip meanwhile):
- FLOPs: per logit a compare for the running K-th largest, a subtraction, an exponential and a
  multiplication: 4*T*V/W on CUDA cores (fp32).
- HBM: read the logits (T*V/W*e), write the fp32 gradient (4*T*V/W), read the int64 targets and
  bf16 grad_output (8T + 2T).
- NVLink: each rank sends its K local candidates of every token to the token's owner,
  (W-1)/W * T*K*e; each owner all-gathers the kept threshold and log-sum-exp of its tokens (two
  fp32 numbers), (W-1)/W * 8T.
HBM-bound at every shape: the fp32 gradient written is twice the bf16 logits read.
"""

from tasks.spec import Phase, Problem, Tolerance, dtype_bytes
from tasks.vocab_parallel_log_prob_topk.problem import SHAPES


def roofline(dims, world_size, dtype):
    t, v, k = dims["B"] * dims["S"], dims["V"], dims["K"]
    w, e = world_size, dtype_bytes(dtype)
    logits = t * v // w
    return [
        Phase(
            "local top-k + candidates to owners + statistics all_gather + gradient",
            flops=4 * logits,
            hbm_bytes=logits * e + logits * 4 + 8 * t + e * t,
            comm_bytes=(w - 1) / w * t * k * e + (w - 1) / w * 8 * t,
            unit="fp32",
        )
    ]


PROBLEM = Problem(
    id="vocab_parallel_log_prob_topk_chunked_backward",
    pkb_id=84,
    title="Vocab-parallel log-probs under top-k/top-p, chunked backward",
    level=3,
    parallelism="TP",
    origin="verl (RL log-probs of sampled tokens under top-k/top-p)",
    description=(
        "Every rank holds vocab_parallel_logits (B, S, V/W) bf16, its vocabulary slice, the same target ids "
        "(B, S) int64 and grad_output (B, S) bf16, tp_group = None, top_k = K, top_p = 0.9 and chunk_size "
        "(about S/4, a multiple of W). Per token, the kept set is the forward's: the top_k largest logits, "
        "then, sorted descending, those whose softmax mass (over the top_k) strictly above them is below "
        "top_p (the largest always). Return the gradient of sum(grad_output * log_prob(target)) with "
        "respect to this rank's logits, (B, S, V/W) fp32: grad_output * (1[v = target] - p_v) on kept "
        "entries, p the softmax over the kept logits, 0 elsewhere. The reference all-to-alls B*chunk_size "
        "tokens at a time into a sequence split and the gradient back; the result does not depend on the "
        "chunking. The draws leave no ties among a token's K+1 largest logits and no mass within 0.02 of "
        "top_p; targets are always kept. HBM-bound (read bf16 logits, write an fp32 gradient) at the "
        "default shape."
    ),
    shapes=SHAPES,
    roofline=roofline,
    tolerance=Tolerance(
        atol=3e-6,
        rtol=2e-6,
        reason=(
            "fp32 gradients of exact bf16 logits (|grad| up to 2.6, most entries exactly 0): the reference "
            "(fp32 exp(logit - logsumexp of the kept)) measured up to 6.9e-7 absolute and 6.9e-7 relative from "
            "the same maths in float64, the public reference (fp32 softmax) 2.0e-7, small (3 draws) and default "
            "shapes at W=2 and 4. The target's entry grad_output*(1 - p) cancels, so its error follows "
            "grad_output (up to 4), not the entry: atol 3e-6 + rtol 2e-6 admits twice the reference's error "
            "with 2x to spare; a softmax rounded to bf16 (2^-9 relative) fails"
        ),
    ),
)
