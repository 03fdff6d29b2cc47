import torch
import torch.distributed as dist
import torch.nn.functional as F


def make_inputs(ctx):
    d = ctx.dims
    batch, seq, experts = d["B"], d["S"], d["E"]
    # A per-rank preference over experts makes the ranks' local losses differ (each rank sees
    # different data), so the cross-rank average matters.
    gate_logits = ctx.randn(batch * seq, experts, dtype=torch.float32) + ctx.randn(experts, dtype=torch.float32)
    mask = None
    if d["masked"]:
        # Right padding: each sequence keeps a random prefix of at least half its length.
        lengths = ctx.randint(seq - seq // 2, seq + 1, batch)
        mask = (torch.arange(seq, device=ctx.device) < lengths.unsqueeze(1)).to(torch.int64)
        # Padding tokens all produce the same skewed router output, as a pad embedding would.
        pad_logits = ctx.randn(experts, shared=True, dtype=torch.float32, scale=3.0)
        gate_logits[mask.reshape(-1) == 0] = pad_logits
    return (gate_logits.to(ctx.dtype), experts, d["K"], mask)


@torch.no_grad()
def solution(gate_logits, num_experts: int, top_k: int = 2, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
    if isinstance(gate_logits, (tuple, list)):
        device = gate_logits[0].device
        logits = torch.cat([layer.to(device) for layer in gate_logits], dim=0)
    else:
        device = gate_logits.device
        logits = gate_logits

    probs = F.softmax(logits, dim=-1)
    _, selected = torch.topk(probs, top_k, dim=-1)
    chosen = F.one_hot(selected, num_experts)  # (tokens, K, E)

    if attention_mask is None:
        tokens_per_expert = chosen.float().mean(dim=0)
        prob_per_expert = probs.mean(dim=0)
    else:
        batch, seq = attention_mask.shape
        layers = logits.shape[0] // (batch * seq)
        slot_mask = (
            attention_mask[None, :, :, None, None]
            .expand(layers, batch, seq, top_k, num_experts)
            .reshape(-1, top_k, num_experts)
            .to(device)
        )
        tokens_per_expert = (chosen.float() * slot_mask).sum(dim=0) / slot_mask.sum(dim=0)
        token_mask = (
            attention_mask[None, :, :, None].expand(layers, batch, seq, num_experts).reshape(-1, num_experts).to(device)
        )
        prob_per_expert = (probs * token_mask).sum(dim=0) / token_mask.sum(dim=0)

    loss = (tokens_per_expert * prob_per_expert.unsqueeze(0)).sum() * num_experts
    if dist.is_available() and dist.is_initialized():
        dist.all_reduce(loss, op=dist.ReduceOp.SUM)
        loss = loss / dist.get_world_size()
    return loss
