import torch
import torch.distributed as dist
import torch.nn.functional as F

from tasks.ring_attention.reference import _block_attention  # queries in chunks: bounded memory

# Process groups per (default group, TP size); new_group is collective, so build them once.
_GROUPS: dict[tuple[int, int], tuple] = {}


def tp_cp_groups(world_size: int, tp_size: int, rank: int):
    """(tp_group, cp_group): TP groups are runs of tp_size consecutive ranks, CP groups take the
    same position in every TP group (Megatron's tp-cp order). Every rank creates every group."""
    key = (id(dist.group.WORLD), tp_size)
    if key not in _GROUPS:
        tp_group = cp_group = None
        for start in range(0, world_size, tp_size):
            ranks = list(range(start, start + tp_size))
            group = dist.new_group(ranks)
            if rank in ranks:
                tp_group = group
        for offset in range(tp_size):
            ranks = list(range(offset, world_size, tp_size))
            group = dist.new_group(ranks)
            if rank in ranks:
                cp_group = group
        _GROUPS[key] = (tp_group, cp_group)
    return _GROUPS[key]


def hidden_sequence(ctx, chunks: int, index: int):
    """Chunk `index` of `chunks` of a (B, T, H) sequence drawn alike on every rank: one random
    vector shared by every token of a batch row (the common direction of real hidden states) plus
    each token's own. Attention averages the tokens' values, so the shared part keeps every output
    row of order 1 wherever it sits in the sequence (independent tokens alone would leave row t
    about 1/sqrt(t) in size)."""
    d = ctx.dims
    hidden = d["NH"] * d["D"]
    common = ctx.randn(d["B"], 1, hidden, shared=True, dtype=torch.float32)
    own = ctx.randn(chunks, d["B"], d["T"] // chunks, hidden, shared=True, dtype=torch.float32)[index]
    return (common + own).to(ctx.dtype).contiguous()


def layer_weights(ctx, layers: int = 1):
    """(layers, 3*H, H) q, k, v rows and (layers, H, H) output projections, unit gain: q and k
    elements of variance about 2, scores of standard deviation about 2."""
    hidden = ctx.dims["NH"] * ctx.dims["D"]
    w_qkv = ctx.randn(layers, 3 * hidden, hidden, shared=True, scale=hidden**-0.5)
    w_o = ctx.randn(layers, hidden, hidden, shared=True, scale=hidden**-0.5)
    return w_qkv, w_o


def make_inputs(ctx):
    d = ctx.dims
    nh, hd = d["NH"], d["D"]
    tp = min(2, ctx.world_size)
    cp = ctx.world_size // tp
    tp_rank, cp_rank = ctx.rank % tp, ctx.rank // tp
    tp_group, cp_group = tp_cp_groups(ctx.world_size, tp, ctx.rank)
    heads = nh // tp
    # The ranks of one TP group hold the same tokens (CP chunk cp_rank), those of one CP group the
    # same heads: q, k, v rows and output-projection columns of heads [tp_rank*NH/TP, ...).
    tokens = hidden_sequence(ctx, cp, cp_rank)
    w_qkv, w_o = layer_weights(ctx)
    mine = slice(tp_rank * heads * hd, (tp_rank + 1) * heads * hd)
    w_qkv_local = w_qkv[0].view(3, nh * hd, nh * hd)[:, mine].reshape(3 * heads * hd, nh * hd).contiguous()
    w_o_local = w_o[0][:, mine].contiguous()
    return (tokens, w_qkv_local, w_o_local, nh, None, True, tp_group, cp_group)


def ring_attention(q, k, v, scale: float, causal: bool, group):
    """Attention over a sequence split in contiguous chunks across `group` (its rank r holds chunk
    r's (B, S, NH, D) q, k, v): key/value blocks travel around the ring, each attended as it comes,
    partial results merged by log-sum-exp. Returns (B, S, NH, D) in q's dtype."""
    members = dist.get_process_group_ranks(group)
    rank, world = dist.get_rank(group), len(members)
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
        # At step s this rank holds the block of rank r - s; under the causal mask only blocks of
        # ranks <= r count, and the diagonal one (step 0) is masked within.
        if not causal or step <= rank:
            block_out, block_lse = _block_attention(q, kv[0], kv[1], scale, causal and step == 0)
            if out is None:
                out, lse = block_out, block_lse
            else:
                merged = torch.logaddexp(lse, block_lse)
                out = out * torch.exp(lse - merged) + block_out * torch.exp(block_lse - merged)
                lse = merged
        for request in pending:
            request.wait()
        if pending:
            kv = incoming
    return out.transpose(1, 2).contiguous().to(q.dtype)


@torch.no_grad()
def solution(hidden_states, w_qkv, w_o, num_heads, softmax_scale=None, causal=False, tp_group=None, cp_group=None):
    tp_group = tp_group or dist.group.WORLD
    cp_group = cp_group or dist.group.WORLD
    tp_size = dist.get_world_size(tp_group)
    heads = num_heads // tp_size
    head_dim = w_qkv.shape[0] // (3 * heads)
    scale = float(softmax_scale) if softmax_scale is not None else head_dim**-0.5
    batch, seq, _ = hidden_states.shape

    # Column-parallel QKV for this rank's heads, attention over the CP ring, the row-parallel share
    # of the output projection, summed over the TP group.
    q, k, v = F.linear(hidden_states, w_qkv).view(batch, seq, 3, heads, head_dim).unbind(dim=2)
    context = ring_attention(q, k, v, scale, causal, cp_group)
    out = F.linear(context.reshape(batch, seq, heads * head_dim), w_o)
    if tp_size > 1:
        dist.all_reduce(out, group=tp_group)
    return out
