import torch
import torch.distributed as dist


def make_inputs(ctx):
    d = ctx.dims
    w = ctx.world_size
    # Every rank's token count from the shared generator, so each knows the global sum.
    counts = ctx.randint(1, d["M"] * d["N"] + 1, w, shared=True)
    empty = ctx.rand(w, shared=True, dtype=torch.float32) < 0.25
    empty[counts.argmax()] = False  # at least one rank has tokens
    counts = counts.masked_fill(empty, 0)
    local = counts[ctx.rank].clone()
    loss = ctx.rand((), low=0.5, high=4.0)
    if local.item() == 0:
        loss = torch.full_like(loss, float("nan"))  # mean over zero tokens
    grad_normalized = ctx.rand((), low=0.5, high=2.0)
    # Scaled so both gradient terms are of the same size.
    grad_loss_sum = ctx.rand((), low=0.5, high=2.0) / (d["M"] * d["N"])
    return (loss, local, counts.sum(), grad_normalized, grad_loss_sum)


@torch.no_grad()
def solution(
    loss: torch.Tensor,
    local_valid_tokens: torch.Tensor,
    global_valid_tokens: torch.Tensor,
    grad_normalized_loss: torch.Tensor,
    grad_loss_sum: torch.Tensor | None = None,
):
    if local_valid_tokens.item() == 0:
        loss = torch.nan_to_num(loss)
    loss_sum = loss * local_valid_tokens
    dist.all_reduce(loss_sum, op=dist.ReduceOp.SUM)
    normalized_loss = loss_sum / global_valid_tokens

    grad_loss = grad_normalized_loss * local_valid_tokens / global_valid_tokens
    if grad_loss_sum is not None:
        grad_loss = grad_loss + grad_loss_sum * local_valid_tokens
    return normalized_loss, loss_sum, grad_loss
