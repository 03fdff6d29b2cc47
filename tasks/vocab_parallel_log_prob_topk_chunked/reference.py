import torch
import torch.distributed as dist

from tasks.vocab_parallel_log_prob_topk.reference import TOP_P, draw_logits, kept_statistics, vocab_to_sequence


def chunk_size_for(seq_len: int, world_size: int) -> int:
    """About a quarter of the sequence, a multiple of the world size (the public suite's rule)."""
    size = -(-max(world_size, seq_len // 4) // world_size) * world_size
    return min(size, seq_len)


def make_inputs(ctx):
    logits, target = draw_logits(ctx)
    return logits, target, None, ctx.dims["K"], TOP_P, chunk_size_for(ctx.dims["S"], ctx.world_size)


@torch.no_grad()
def solution(vocab_parallel_logits, target, tp_group=None, top_k=None, top_p=1.0, chunk_size=1):
    """The same log-probs as vocab_parallel_log_prob_topk, computed B*chunk_size tokens (of the
    flattened (B*S) order) at a time, so the sequence-split logits of one chunk are all that is
    held at once."""
    group = tp_group or dist.group.WORLD
    world, rank = dist.get_world_size(group), dist.get_rank(group)
    b, s, shard = vocab_parallel_logits.shape
    flat = vocab_parallel_logits.reshape(b * s, shard)
    targets = target.reshape(-1)
    step = b * max(1, int(chunk_size))
    out = torch.empty(b * s, dtype=torch.float32, device=flat.device)
    for start in range(0, b * s, step):
        stop = min(start + step, b * s)
        mine = (stop - start) // world
        logits = vocab_to_sequence(flat[start:stop], group).float()
        tgt = targets[start + rank * mine : start + (rank + 1) * mine]
        smallest, lse = kept_statistics(logits, top_k, top_p)
        picked = logits.gather(-1, tgt[:, None]).squeeze(-1)
        log_prob = torch.where(picked >= smallest, picked - lse, torch.full_like(picked, float("-inf")))
        dist.all_gather_into_tensor(out[start:stop], log_prob, group=group)
    return out.view(b, s)
