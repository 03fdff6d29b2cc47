import torch
import torch.distributed as dist
import torch.nn.functional as F

from tasks.fused_moe_fwd.reference import ROUTER_SCALE, build_inputs, lifts

LORA_SHARE = 0.5  # size of each adapter's contribution next to its projection's unit output


def _adapter(ctx, fan_in: int, fan_out: int, rank: int, input_norm: float):
    """A (rank, fan_in) with unit-size products for inputs of the given norm, and B (fan_out, rank)
    mapping them to outputs of size LORA_SHARE."""
    a = ctx.randn(rank, fan_in, scale=1.0 / input_norm)
    b = ctx.randn(fan_out, rank, scale=LORA_SHARE / rank**0.5)
    return a, b


def make_inputs(ctx):
    d = ctx.dims
    (hidden_states, gate_weight, gate_bias, gate_proj, up_proj, down_proj, experts, top_k, group) = build_inputs(
        ctx, d["E"]
    )
    token_norm = (d["H"] + float((lifts(d["K"]) / ROUTER_SCALE).square().sum())) ** 0.5
    gate_a, gate_b = _adapter(ctx, d["H"], d["I"], d["R"], token_norm)
    up_a, up_b = _adapter(ctx, d["H"], d["I"], d["R"], token_norm)
    down_a, down_b = _adapter(ctx, d["I"], d["H"], d["R"], d["I"] ** 0.5)
    return (
        hidden_states, gate_weight, gate_bias, gate_proj, up_proj, down_proj,
        gate_a, gate_b, up_a, up_b, down_a, down_b, experts, top_k, group,
    )


def _regroup(x: torch.Tensor, sizes: list[int], order: list[int]) -> torch.Tensor:
    chunks = torch.split(x, sizes, dim=0)
    return torch.cat([chunks[i] for i in order], dim=0)


def _exchange(x: torch.Tensor, recv: list[int], send: list[int], group) -> torch.Tensor:
    out = x.new_empty((sum(recv), x.size(1)))
    dist.all_to_all_single(out, x.contiguous(), recv, send, group=group)
    return out


def _with_adapter(layer: torch.nn.Linear, a: torch.Tensor, b: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    return layer(x) + F.linear(F.linear(x, a), b)


@torch.no_grad()
def solution(
    hidden_states, gate_weight, gate_bias, gate_proj, up_proj, down_proj,
    lora_gate_A, lora_gate_B, lora_up_A, lora_up_B, lora_down_A, lora_down_B,
    num_experts, top_k, group=None,
):
    group = group or dist.group.WORLD
    world = dist.get_world_size(group)
    rank = dist.get_rank(group)
    local = num_experts // world
    x = hidden_states.reshape(-1, hidden_states.size(-1))
    n = x.size(0)

    # Router: the top-k softmax probabilities over every expert are the combine weights.
    probs = torch.softmax(F.linear(x, gate_weight, gate_bias), dim=-1)
    weights, chosen = torch.topk(probs, top_k, dim=-1)
    mask = torch.zeros(num_experts, n, dtype=torch.bool, device=x.device)
    mask.scatter_(0, chosen.T.contiguous(), True)

    # Every rank's counts per expert fix how many rows travel between each pair of ranks.
    counts = mask.sum(dim=1)
    table = counts.new_empty(world * num_experts)
    dist.all_gather_into_tensor(table, counts, group=group)
    mine = table.view(world, num_experts)[:, rank * local:(rank + 1) * local]  # (source, local expert)
    send = counts.view(world, local).sum(dim=1).tolist()
    recv = mine.sum(dim=1).tolist()

    # Dispatch one copy of a token per chosen expert, expert-major; regroup arrivals by local expert.
    token_of = torch.arange(n, device=x.device).expand(num_experts, -1).masked_select(mask)
    arrived = _exchange(x.index_select(0, token_of), recv, send, group)
    by_expert = torch.arange(world * local).view(world, local).T.reshape(-1).tolist()
    h = _regroup(arrived, mine.reshape(-1).tolist(), by_expert)

    # The rank's experts share its MLP and adapters.
    y = F.silu(_with_adapter(gate_proj, lora_gate_A, lora_gate_B, h)) * _with_adapter(up_proj, lora_up_A, lora_up_B, h)
    expert_out = _with_adapter(down_proj, lora_down_A, lora_down_B, y)

    # Back to source order, home, and the weighted sum over each token's experts.
    by_source = torch.arange(world * local).view(local, world).T.reshape(-1).tolist()
    back = _exchange(_regroup(expert_out, mine.T.reshape(-1).tolist(), by_source), send, recv, group)
    dense = weights.new_zeros((n, num_experts)).scatter_add_(1, chosen, weights)
    back = back * dense.T.contiguous().masked_select(mask).unsqueeze(-1)
    out = back.new_zeros(x.shape)
    out.scatter_add_(0, token_of.unsqueeze(1).expand(-1, x.size(1)), back)
    return out
