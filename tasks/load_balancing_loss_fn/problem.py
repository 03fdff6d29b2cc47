"""MoE auxiliary load-balancing loss (Switch/Mixtral style), averaged over data-parallel ranks.

Rank r holds router logits (B*S, E) in bf16 for its tokens, num_experts = E, top_k = K and an
optional attention mask (B, S) int64 (1 = real token; each sequence keeps a random prefix of at
least S/2 tokens). With p = softmax(logits) and f_e the fraction of (token, choice) slots whose
top-K pick is expert e (masked tokens excluded from both means), the local loss is
E * sum_e f_e * mean_tokens(p_e); the result is its mean over ranks, an fp32 scalar.

Roofline per GPU, X = B*S*E logits, e bytes per element, two phases (the average needs every
rank's complete local loss):
1. local loss: HBM reads the logits (X*e) and the mask if present (B*S*8). FLOPs counted per
   logit: max, subtract, exp, sum and divide for the softmax, one add for the probability mean,
   one add for the expert counts, K compares for the top-K selection: (7 + K) * X on CUDA cores.
2. average: NVLink all-reduce of one fp32 value, 2(W-1)/W * 4 bytes; HBM writes the result.
Latency-bound at every realistic size.
"""

from tasks.spec import Phase, Problem, Shape, Tolerance, dtype_bytes


def roofline(dims, world_size, dtype):
    tokens = dims["B"] * dims["S"]
    logits = tokens * dims["E"]
    w = world_size
    mask_bytes = tokens * 8 if dims["masked"] else 0
    return [
        Phase(
            "local_loss",
            flops=(7 + dims["K"]) * logits,
            hbm_bytes=logits * dtype_bytes(dtype) + mask_bytes,
            unit="fp32",
        ),
        Phase("allreduce", flops=1, hbm_bytes=4, comm_bytes=2 * (w - 1) / w * 4, unit="fp32"),
    ]


PROBLEM = Problem(
    id="load_balancing_loss_fn",
    pkb_id=24,
    title="MoE load-balancing loss across data-parallel ranks",
    level=2,
    parallelism="DP",
    origin="Hugging Face Transformers (Mixtral load_balancing_loss_func)",
    description=(
        "Every rank holds the router logits of its tokens (B*S, E) in bf16 and optionally an "
        "attention mask. Compute the auxiliary load-balancing loss, E times the sum over experts of "
        "(fraction of top-K slots routed to the expert) x (mean router probability), over unmasked "
        "tokens, and return its mean over ranks (fp32 scalar). Added to every MoE training loss; "
        "latency-bound (a softmax pass and one scalar all-reduce)."
    ),
    shapes=(
        Shape("small-masked", {"B": 2, "S": 8, "E": 8, "K": 2, "masked": 1}),
        Shape("default", {"B": 1, "S": 1024, "E": 8, "K": 2, "masked": 0}, default=True),
        Shape("large-masked", {"B": 8, "S": 4096, "E": 64, "K": 8, "masked": 1}),
    ),
    roofline=roofline,
    tolerance=Tolerance(
        atol=1e-3,
        rtol=1e-2,
        reason="a loss near K: bf16 reference vs fp64 within 0.19% relative (bf16 router probabilities; all shapes, "
        "W=2 and 4); 5x margin. Skipping the cross-rank mean or the mask moves it by several percent",
    ),
)
