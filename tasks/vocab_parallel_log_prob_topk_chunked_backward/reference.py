import torch
import torch.distributed as dist

from tasks.vocab_parallel_log_prob_topk.reference import TOP_P, draw_logits, kept_statistics, vocab_to_sequence
from tasks.vocab_parallel_log_prob_topk_chunked.reference import chunk_size_for


def make_inputs(ctx):
    logits, target = draw_logits(ctx)
    # The gradient of the (B, S) log-probs, replicated like them.
    grad_output = ctx.randn(ctx.dims["B"], ctx.dims["S"], shared=True)
    return logits, target, grad_output, None, ctx.dims["K"], TOP_P, chunk_size_for(ctx.dims["S"], ctx.world_size)


def sequence_to_vocab(x: torch.Tensor, group) -> torch.Tensor:
    """(T/W, V) -> (T, V/W): every token of the chunk over this rank's vocabulary slice."""
    world = dist.get_world_size(group)
    mine, vocab = x.shape
    send = x.view(mine, world, vocab // world).transpose(0, 1).contiguous()
    received = torch.empty_like(send)
    dist.all_to_all_single(received.view(-1), send.view(-1), group=group)
    return received.view(world * mine, vocab // world)


@torch.no_grad()
def solution(vocab_parallel_logits, target, grad_output, tp_group=None, top_k=None, top_p=1.0, chunk_size=1):
    """Gradient of sum(grad_output * log_prob) with respect to the vocab-parallel logits, where
    log_prob is vocab_parallel_log_prob_topk's: grad_output * (1[target] - softmax over the kept
    logits) on kept entries, 0 elsewhere; fp32, (B, S, V/W), B*chunk_size tokens at a time."""
    group = tp_group or dist.group.WORLD
    world, rank = dist.get_world_size(group), dist.get_rank(group)
    b, s, shard = vocab_parallel_logits.shape
    flat = vocab_parallel_logits.reshape(b * s, shard)
    targets, grads = target.reshape(-1), grad_output.reshape(-1)
    step = b * max(1, int(chunk_size))
    out = torch.empty(b * s, shard, dtype=torch.float32, device=flat.device)
    for start in range(0, b * s, step):
        stop = min(start + step, b * s)
        mine = (stop - start) // world
        own = slice(start + rank * mine, start + (rank + 1) * mine)
        logits = vocab_to_sequence(flat[start:stop], group).float()
        smallest, lse = kept_statistics(logits, top_k, top_p)
        kept = logits >= smallest[:, None]
        grad = torch.exp(logits - lse[:, None]).neg_()
        grad.scatter_add_(1, targets[own][:, None], torch.ones(mine, 1, dtype=grad.dtype, device=grad.device))
        grad.mul_(kept).mul_(grads[own].float()[:, None])
        out[start:stop] = sequence_to_vocab(grad, group)
    return out.view(b, s, shard)
