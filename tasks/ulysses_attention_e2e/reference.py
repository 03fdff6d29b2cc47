import torch
import torch.distributed as dist
import torch.nn.functional as F


def make_inputs(ctx):
    d = ctx.dims
    hidden = d["NH"] * d["D"]
    group = d["NH"] // ctx.world_size
    hidden_states = ctx.randn(d["B"], d["S"], hidden)
    # Replicated weights (every rank holds the same model). q and k entries of variance 1/2 give
    # scores q.k/sqrt(D) of variance 1/4; a head's output averages the v of its G = NH/W group
    # (about 1/G of the square sum), so the v rows are scaled by sqrt(G): outputs of unit size.
    w_qkv = ctx.randn(3 * hidden, hidden, shared=True, scale=hidden**-0.5, dtype=torch.float32)
    w_qkv[: 2 * hidden] *= 0.5**0.5
    w_qkv[2 * hidden :] *= group**0.5
    w_o = ctx.randn(hidden, hidden, shared=True, scale=hidden**-0.5)
    return (hidden_states, w_qkv.to(ctx.dtype), w_o, None, d["NH"], False)


@torch.no_grad()
def solution(
    hidden_states: torch.Tensor,
    w_qkv: torch.Tensor,
    w_o: torch.Tensor,
    group=None,
    num_heads: int = 8,
    causal: bool = False,
) -> torch.Tensor:
    world_size = dist.get_world_size(group or dist.group.WORLD)
    batch, seq_local, _ = hidden_states.shape
    head_dim = w_qkv.shape[0] // 3 // num_heads
    heads = num_heads // world_size  # one head group: what a rank holds after Ulysses' all-to-all

    # Nothing crosses ranks: every token's heads are here, and the attention stays within a token.
    qkv = F.linear(hidden_states, w_qkv).view(batch, seq_local, 3, world_size, heads, head_dim)
    q, k, v = (t.float() for t in qkv.unbind(2))  # (B, S, groups, heads, D)
    scores = torch.matmul(q, k.transpose(-2, -1)) * head_dim**-0.5  # (B, S, groups, heads, heads)
    if causal and world_size * seq_local > 1:
        # The public code's sequence mask, applied to these head-by-head scores.
        later = torch.ones(heads, heads, dtype=torch.bool, device=scores.device).triu(1)
        scores = scores.masked_fill(later, float("-inf"))
    attn = torch.matmul(torch.softmax(scores, dim=-1), v).to(hidden_states.dtype)
    return F.linear(attn.reshape(batch, seq_local, num_heads * head_dim), w_o)
