import torch
import torch.distributed as dist
import torch.nn.functional as F

IGNORE_INDEX = -100


def _current_logprobs(hidden_states, weight, labels, chunk=1024):
    """fp32 log-probabilities of the labels, chunked over tokens to bound memory."""
    out = []
    for start in range(0, hidden_states.size(0), chunk):
        logits = F.linear(hidden_states[start : start + chunk].float(), weight.float())
        out.append(-F.cross_entropy(logits, labels[start : start + chunk], ignore_index=IGNORE_INDEX, reduction="none"))
    return torch.cat(out)


def make_inputs(ctx):
    d = ctx.dims
    tokens, hidden, vocab = d["T"], d["H"], d["V"]
    hidden_states = ctx.randn(tokens, hidden)
    weight = ctx.randn(vocab, hidden, shared=True, scale=hidden**-0.5)
    labels = ctx.randint(0, vocab, tokens)
    labels = labels.masked_fill(ctx.rand(tokens, dtype=torch.float32) < 0.1, IGNORE_INDEX)
    # The policy that sampled the tokens is close to the current one.
    current = _current_logprobs(hidden_states, weight, labels)
    old_logprobs = (current + ctx.randn(tokens, dtype=torch.float32, scale=0.2)).to(ctx.dtype)
    # Each rank's batch has its own mean advantage, so the global sums differ from local ones.
    advantages = ctx.randn(tokens, dtype=torch.float32) + ctx.rand(1, dtype=torch.float32, low=-1.0, high=1.0)
    advantages = advantages.to(ctx.dtype)
    return (hidden_states, weight, labels, old_logprobs, advantages, IGNORE_INDEX)


@torch.no_grad()
def solution(
    hidden_states: torch.Tensor,
    weight: torch.Tensor,
    labels: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    ignore_index: int = -100,
):
    logits = F.linear(hidden_states, weight)
    per_token_ce = F.cross_entropy(
        logits.view(-1, logits.size(-1)), labels.view(-1), ignore_index=ignore_index, reduction="none"
    )
    new_logprobs = -per_token_ce
    old = old_logprobs.view(-1)
    adv = advantages.view(-1)
    valid = labels.view(-1) != ignore_index

    n_valid_local = valid.sum().float()
    n_valid = n_valid_local.clone()
    dist.all_reduce(n_valid)
    n_valid = n_valid.clamp(min=1.0)

    delta = (new_logprobs - old).masked_fill(~valid, 0.0).clamp(min=-20.0, max=20.0)
    ratio = torch.exp(delta)
    per_token_pg = -(ratio * adv).masked_fill(~valid, 0.0)
    pg_sum = per_token_pg.sum()
    dist.all_reduce(pg_sum)
    true_pg = pg_sum / n_valid

    # Surrogate whose gradient flows through the cross entropy; it adds zero to the value.
    surrogate = ((ratio * adv).masked_fill(~valid, 0.0) * per_token_ce).sum() / n_valid
    loss = true_pg + surrogate - surrogate

    ratio_sum = ratio.masked_fill(~valid, 0.0).sum()
    dist.all_reduce(ratio_sum)
    if n_valid_local > 0:
        ratio_min = ratio.masked_fill(~valid, float("inf")).min()
        ratio_max = ratio.masked_fill(~valid, float("-inf")).max()
    else:
        ratio_min = torch.tensor(float("inf"), device=ratio.device, dtype=ratio.dtype)
        ratio_max = torch.tensor(float("-inf"), device=ratio.device, dtype=ratio.dtype)
    dist.all_reduce(ratio_min, op=dist.ReduceOp.MIN)
    dist.all_reduce(ratio_max, op=dist.ReduceOp.MAX)
    k3_sum = (ratio - delta - 1.0).masked_fill(~valid, 0.0).sum()
    dist.all_reduce(k3_sum)
    entropy_sum = per_token_ce.masked_fill(~valid, 0.0).sum()
    dist.all_reduce(entropy_sum)

    metrics = torch.stack([ratio_sum / n_valid, ratio_min, ratio_max, k3_sum / n_valid, entropy_sum / n_valid])
    return loss, None, new_logprobs.view_as(labels), per_token_pg.view_as(labels), metrics
