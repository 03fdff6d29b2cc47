import torch
import torch.distributed as dist
import torch.nn.functional as F


def make_inputs(ctx):
    d = ctx.dims
    hidden = d["NH"] * d["D"]
    hidden_states = ctx.randn(d["B"], d["S"], hidden)
    # Replicated weights (every rank holds the same model). q and k entries have variance 1/2, so
    # the scaled scores q.k/sqrt(D) have variance 1/4: attention spreads over much of the sequence,
    # and v is scaled by sqrt(sequence length) to keep the output of unit size at every shape.
    w_qkv = ctx.randn(3 * hidden, hidden, shared=True, scale=hidden**-0.5)
    w_qkv[: 2 * hidden] *= 0.5**0.5
    w_qkv[2 * hidden :] *= (ctx.world_size * d["S"]) ** 0.5
    w_o = ctx.randn(hidden, hidden, shared=True, scale=hidden**-0.5)
    return (hidden_states, w_qkv, w_o, None, d["NH"], False)


def _all_to_all(send: torch.Tensor, group) -> torch.Tensor:
    # Both buffers contiguous: empty_like keeps a permuted view's strides, and NCCL rejects those.
    send = send.contiguous()
    recv = torch.empty_like(send)
    dist.all_to_all_single(recv, send, group=group)
    return recv


@torch.no_grad()
def solution(
    hidden_states: torch.Tensor,
    w_qkv: torch.Tensor,
    w_o: torch.Tensor,
    group=None,
    num_heads: int = 8,
    causal: bool = False,
) -> torch.Tensor:
    group = group or dist.group.WORLD
    world_size = dist.get_world_size(group)
    batch, seq_local, _ = hidden_states.shape
    head_dim = w_qkv.shape[0] // 3 // num_heads
    local_heads = num_heads // world_size
    seq = world_size * seq_local

    # Sequence-sharded -> head-sharded: head group r of every rank's tokens goes to rank r.
    qkv = F.linear(hidden_states, w_qkv).view(batch, seq_local, 3, world_size, local_heads, head_dim)
    recv = _all_to_all(qkv.permute(3, 0, 1, 2, 4, 5), group)  # (source rank, B, S, 3, heads, D)
    qkv = recv.permute(1, 0, 2, 3, 4, 5).reshape(batch, seq, 3, local_heads, head_dim)
    q, k, v = (qkv[:, :, i].transpose(1, 2) for i in range(3))  # (B, heads, L, D)

    scores = torch.matmul(q, k.transpose(-2, -1)) * head_dim**-0.5
    if causal:
        future = torch.ones(seq, seq, dtype=torch.bool, device=scores.device).triu(1)
        scores = scores.masked_fill(future, float("-inf"))
    attn = torch.matmul(torch.softmax(scores, dim=-1), v)  # (B, heads, L, D)

    # Head-sharded -> sequence-sharded: token slice s of every head group goes to rank s.
    send = attn.transpose(1, 2).reshape(batch, world_size, seq_local, local_heads, head_dim).transpose(0, 1)
    recv = _all_to_all(send, group)  # (head group, B, S, heads, D)
    out = recv.permute(1, 2, 0, 3, 4).reshape(batch, seq_local, num_heads * head_dim)
    return F.linear(out, w_o)
