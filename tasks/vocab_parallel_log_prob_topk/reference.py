import torch
import torch.distributed as dist

TOP_P = 0.9
# A token's K largest logits (its "head") are 3 + m/8 for K distinct integers m in [0, GRID):
# exact in bf16, no two equal. The rest of its vocabulary lies below the smallest of them.
GRID = 40
# No candidate's probability mass above it lies within MARGIN of top_p, so every honest order of
# the softmax and prefix sum (bf16 included) keeps the same tokens.
MARGIN = 0.02


def _heads(ctx, tokens: int, k: int) -> torch.Tensor:
    """(tokens, k) float64, each row descending, drawn again where a kept/dropped decision of the
    top-p rule would lie within MARGIN of top_p."""
    heads = torch.empty(tokens, k, dtype=torch.float64)
    todo = torch.arange(tokens)
    for _ in range(1000):
        if todo.numel() == 0:
            return heads
        m = ctx.rand(todo.numel(), GRID, dtype=torch.float32, shared=True).argsort(dim=1)[:, :k].cpu()
        rows = 3.0 + m.sort(dim=1, descending=True).values.double() / 8
        probs = torch.softmax(rows, dim=1)
        above = torch.cumsum(probs, dim=1) - probs
        ok = ((above - TOP_P).abs() >= MARGIN).all(dim=1)
        heads[todo[ok]] = rows[ok]
        todo = todo[~ok]
    raise RuntimeError("could not draw heads clear of the top-p boundary")


def _positions(ctx, tokens: int, k: int, vocab: int) -> torch.Tensor:
    """(tokens, k) int64 vocabulary ids, distinct within each row."""
    pos = torch.empty(tokens, k, dtype=torch.long)
    todo = torch.arange(tokens)
    for _ in range(1000):
        if todo.numel() == 0:
            return pos
        rows = ctx.randint(0, vocab, todo.numel(), k, shared=True).cpu()
        s = rows.sort(dim=1).values
        ok = (s[:, 1:] != s[:, :-1]).all(dim=1)
        pos[todo[ok]] = rows[ok]
        todo = todo[~ok]
    raise RuntimeError("could not draw distinct positions")


def draw_logits(ctx):
    """This rank's vocab-parallel logits (B, S, V/W) bf16 and the shared targets (B, S) int64.

    Every token's K largest logits and their places in the vocabulary come from the shared
    generator (so all ranks agree on them); the rest of this rank's slice is Gaussian noise from
    its own generator, capped 1/4 below the token's smallest head value. The target is drawn
    among the tokens the top-k/top-p rule keeps, so every log-probability is finite."""
    d = ctx.dims
    b, s, v, k = d["B"], d["S"], d["V"], d["K"]
    tokens, shard, first = b * s, v // ctx.world_size, ctx.rank * (v // ctx.world_size)
    heads = _heads(ctx, tokens, k)
    positions = _positions(ctx, tokens, k, v)
    probs = torch.softmax(heads, dim=1)
    kept = ((torch.cumsum(probs, dim=1) - probs) < TOP_P).sum(dim=1)
    pick = (ctx.rand(tokens, dtype=torch.float32, shared=True).cpu().double() * kept).long().clamp(max=k - 1)
    target = positions.gather(1, pick[:, None]).squeeze(1)

    cap = (heads[:, -1] - 0.25).to(ctx.dtype).to(ctx.device)
    logits = torch.minimum(ctx.randn(tokens, shard), cap[:, None])
    local = (positions >= first) & (positions < first + shard)
    rows = torch.arange(tokens)[:, None].expand(-1, k)[local]
    logits[rows.to(ctx.device), (positions[local] - first).to(ctx.device)] = heads[local].to(ctx.dtype).to(ctx.device)
    return logits.view(b, s, shard), target.view(b, s).to(ctx.device)


def make_inputs(ctx):
    logits, target = draw_logits(ctx)
    return logits, target, None, ctx.dims["K"], TOP_P


def vocab_to_sequence(x: torch.Tensor, group) -> torch.Tensor:
    """(T, V/W) on every rank -> (T/W, V): this rank's block of tokens over the whole vocabulary."""
    world = dist.get_world_size(group)
    tokens, shard = x.shape
    received = torch.empty(world, tokens // world, shard, dtype=x.dtype, device=x.device)
    dist.all_to_all_single(received.view(-1), x.contiguous().view(-1), group=group)
    return received.permute(1, 0, 2).reshape(tokens // world, world * shard)


def kept_statistics(logits: torch.Tensor, top_k, top_p):
    """Per token of (n, V) fp32 logits: the smallest kept logit and the log of the kept tokens'
    sum of exponentials. Kept: among the top_k largest logits, sorted descending, those whose
    probability mass above them (softmax over the top_k) is below top_p; the largest always."""
    k = logits.shape[-1] if not top_k or top_k <= 0 else min(int(top_k), logits.shape[-1])
    top = logits.topk(k, dim=-1).values
    keep = torch.ones_like(top, dtype=torch.bool)
    if top_p is not None and top_p < 1.0:
        probs = torch.softmax(top, dim=-1)
        keep = (torch.cumsum(probs, dim=-1) - probs) < top_p
        keep[:, 0] = True
    smallest = top.masked_fill(~keep, float("inf")).amin(dim=-1)
    lse = torch.logsumexp(top.masked_fill(~keep, float("-inf")), dim=-1)
    return smallest, lse


@torch.no_grad()
def solution(vocab_parallel_logits, target, tp_group=None, top_k=None, top_p=1.0):
    group = tp_group or dist.group.WORLD
    world, rank = dist.get_world_size(group), dist.get_rank(group)
    b, s, shard = vocab_parallel_logits.shape
    mine = (b * s) // world
    logits = vocab_to_sequence(vocab_parallel_logits.reshape(b * s, shard), group).float()
    tgt = target.reshape(-1)[rank * mine : (rank + 1) * mine]

    smallest, lse = kept_statistics(logits, top_k, top_p)
    picked = logits.gather(-1, tgt[:, None]).squeeze(-1)
    log_prob = torch.where(picked >= smallest, picked - lse, torch.full_like(picked, float("-inf")))

    out = torch.empty(b * s, dtype=log_prob.dtype, device=log_prob.device)
    dist.all_gather_into_tensor(out, log_prob, group=group)
    return out.view(b, s)
