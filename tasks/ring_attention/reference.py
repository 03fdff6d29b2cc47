import torch
import torch.distributed as dist

# Scores q.k/sqrt(D) of standard deviation 2: attention concentrates on a few dozen keys, as in
# trained models, and outputs stay between about 0.1 and 1 at every sequence length.
Q_SCALE = 2.0


def make_inputs(ctx):
    d = ctx.dims
    local = d["T"] // ctx.world_size
    shape = (d["B"], local, d["NH"], d["D"])
    q = ctx.randn(*shape, scale=Q_SCALE)
    k = ctx.randn(*shape)
    v = ctx.randn(*shape)
    return (q, k, v, None, True, None)


# Scores are made for this many (query, key) pairs at a time: at world 1 the large shape's block
# holds 32768 x 32768 pairs per head, 32 GiB at once in fp32.
SCORE_CHUNK = 1 << 26


def query_chunks(q, keys: int, diagonal: bool):
    """The heads-first queries' rows (q: (B, NH, Sq, D)) in chunks whose scores against `keys` keys
    hold at most SCORE_CHUNK pairs: (the chunk's rows, and where `diagonal` the mask of the keys
    each row must not see, else None). Each row's softmax is its own, so chunks change nothing."""
    step = max(1, SCORE_CHUNK // (q.shape[0] * q.shape[1] * keys))
    for start in range(0, q.shape[-2], step):
        rows = slice(start, min(start + step, q.shape[-2]))
        future = None
        if diagonal:
            row = torch.arange(rows.start, rows.stop, device=q.device)[:, None]
            future = torch.arange(keys, device=q.device) > row
        yield rows, future


def _block_attention(q, k, v, scale: float, diagonal: bool):
    """Attention of the local queries over one block of keys, in fp32: the normalised output
    (B, NH, Sq, D) and the log-sum-exp of the scores (B, NH, Sq, 1). `diagonal`: the block holds
    the same tokens as the queries, so each query sees only the keys up to itself."""
    qh, kh, vh = (t.transpose(1, 2).float() for t in (q, k, v))
    outs, lses = [], []
    for rows, future in query_chunks(qh, kh.shape[-2], diagonal):
        scores = torch.matmul(qh[..., rows, :], kh.transpose(-2, -1)) * scale
        if future is not None:
            scores = scores.masked_fill(future, float("-inf"))
        lse = torch.logsumexp(scores, dim=-1, keepdim=True)
        outs.append(torch.matmul(torch.exp(scores - lse), vh))
        lses.append(lse)
    return torch.cat(outs, dim=-2), torch.cat(lses, dim=-2)


@torch.no_grad()
def solution(q, k, v, softmax_scale=None, causal=False, group=None):
    group = group or dist.group.WORLD
    members = dist.get_process_group_ranks(group)
    rank, world = dist.get_rank(group), len(members)
    scale = float(softmax_scale) if softmax_scale is not None else q.shape[-1] ** -0.5

    # Keys and values travel together, one block per step: at step s this rank holds the block of
    # rank r - s. Rank r's queries are tokens [r*S, (r+1)*S), so under the causal mask only blocks
    # of ranks <= r count, and the diagonal one (step 0) is masked within.
    kv = torch.stack([k, v])
    out = lse = None
    for step in range(world):
        pending = []
        if step + 1 < world:
            incoming = torch.empty_like(kv)
            pending = dist.batch_isend_irecv([
                dist.P2POp(dist.isend, kv, members[(rank + 1) % world], group),
                dist.P2POp(dist.irecv, incoming, members[(rank - 1) % world], group),
            ])
        if not causal or step <= rank:
            block_out, block_lse = _block_attention(q, kv[0], kv[1], scale, causal and step == 0)
            if out is None:
                out, lse = block_out, block_lse
            else:
                # Merge two softmax-normalised partial results by their log-sum-exps.
                merged = torch.logaddexp(lse, block_lse)
                out = out * torch.exp(lse - merged) + block_out * torch.exp(block_lse - merged)
                lse = merged
        for request in pending:
            request.wait()
        if pending:
            kv = incoming
    return out.transpose(1, 2).contiguous().to(q.dtype)
