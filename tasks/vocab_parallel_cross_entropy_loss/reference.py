import torch
import torch.distributed as dist


def make_inputs(ctx):
    d = ctx.dims
    logits = ctx.randn(d["B"], d["S"], d["V"] // ctx.world_size)
    # Every rank sees the same labels: the vocabulary is split, the tokens are not.
    target = ctx.randint(0, d["V"], d["B"], d["S"], shared=True)
    return logits, target, None


@torch.no_grad()
def solution(vocab_parallel_logits: torch.Tensor, target: torch.Tensor, group=None) -> torch.Tensor:
    """Per-token cross-entropy; shifts this rank's logits in place by the global row maximum, as
    Megatron's vocab-parallel cross-entropy does."""
    group = group or dist.group.WORLD
    logits = vocab_parallel_logits
    shard = logits.shape[-1]
    first = dist.get_rank(group) * shard

    row_max = logits.amax(dim=-1)
    dist.all_reduce(row_max, op=dist.ReduceOp.MAX, group=group)
    logits.sub_(row_max.unsqueeze(-1))

    # The target's logit lives on one rank; the others contribute zero to the sum.
    local_target = target - first
    mine = (local_target >= 0) & (local_target < shard)
    picked = logits.gather(-1, local_target.clamp(0, shard - 1).unsqueeze(-1)).squeeze(-1)
    target_logit = torch.where(mine, picked, torch.zeros_like(picked))
    dist.all_reduce(target_logit, op=dist.ReduceOp.SUM, group=group)

    sum_exp = logits.exp().sum(dim=-1)
    dist.all_reduce(sum_exp, op=dist.ReduceOp.SUM, group=group)
    return sum_exp.log() - target_logit
