import torch
import torch.distributed as dist
import torch.nn.functional as F

ROUTER_SCALE = 0.25  # norm of a router row: logit noise of this size
LIFT = 3.5  # logit lift of a token's K-th expert over the unchosen ones


def planted_router_inputs(ctx, tokens: int, hidden: int, experts: int, top_k: int):
    """hidden_states, gate_weight, gate_bias with unambiguous top-k routing.

    Router rows are orthogonal with norm ROUTER_SCALE; each token gets planted components that
    lift its top_k experts (distinct, uniform) LIFT, LIFT + 0.5, ... logits above the rest,
    against logit noise and a router bias of size ROUTER_SCALE, so no rounding of bf16 logits can
    change the chosen set. Logits stay small, where bf16 resolves them finely."""
    basis, _ = torch.linalg.qr(ctx.randn(hidden, experts, shared=True, dtype=torch.float32))
    gate_weight = ROUTER_SCALE * basis.T  # (E, H)
    gate_bias = ctx.randn(experts, shared=True, dtype=torch.float32, scale=ROUTER_SCALE)
    choice = ctx.rand(tokens, experts, dtype=torch.float32).argsort(dim=1)[:, :top_k]
    planted = torch.zeros(tokens, experts, dtype=torch.float32, device=ctx.device)
    planted.scatter_(1, choice, lifts(top_k, ctx.device).expand(tokens, -1).contiguous())
    hidden_states = ctx.randn(tokens, hidden, dtype=torch.float32) + planted @ basis.T / ROUTER_SCALE
    return hidden_states.to(ctx.dtype), gate_weight.to(ctx.dtype), gate_bias.to(ctx.dtype)


def lifts(top_k: int, device=None) -> torch.Tensor:
    return LIFT + 0.5 * torch.arange(top_k - 1, -1, -1, dtype=torch.float32, device=device)


def expert_linear(ctx, fan_in: int, fan_out: int, input_norm: float) -> torch.nn.Linear:
    """Linear layer whose outputs are of unit size for inputs of the given norm."""
    layer = torch.nn.Linear(fan_in, fan_out, device=ctx.device, dtype=ctx.dtype)
    with torch.no_grad():
        layer.weight.copy_(ctx.randn(fan_out, fan_in, dtype=torch.float32, scale=1.0 / input_norm))
        layer.bias.copy_(ctx.randn(fan_out, dtype=torch.float32, scale=0.1))
    layer.requires_grad_(False)
    return layer


def build_inputs(ctx, experts: int):
    d = ctx.dims
    hidden_states, gate_weight, gate_bias = planted_router_inputs(ctx, d["T"], d["H"], experts, d["K"])
    # Token norm: unit noise in every coordinate plus the planted lifts.
    token_norm = (d["H"] + float((lifts(d["K"]) / ROUTER_SCALE).square().sum())) ** 0.5
    gate_proj = expert_linear(ctx, d["H"], d["I"], token_norm)
    up_proj = expert_linear(ctx, d["H"], d["I"], token_norm)
    down_proj = expert_linear(ctx, d["I"], d["H"], d["I"] ** 0.5)
    return (hidden_states, gate_weight, gate_bias, gate_proj, up_proj, down_proj, experts, d["K"], None)


def make_inputs(ctx):
    return build_inputs(ctx, ctx.dims["E"])


def _sort_chunks(x: torch.Tensor, split_sizes: list[int], order: list[int]) -> torch.Tensor:
    chunks = torch.split(x, split_sizes, dim=0)
    return torch.cat([chunks[i] for i in order], dim=0)


def _all_to_all(x: torch.Tensor, output_splits: list[int], input_splits: list[int], group) -> torch.Tensor:
    out = x.new_empty((sum(output_splits), x.size(1)))
    dist.all_to_all_single(out, x.contiguous(), output_splits, input_splits, group=group)
    return out


@torch.no_grad()
def solution(
    hidden_states: torch.Tensor,
    gate_weight: torch.Tensor,
    gate_bias: torch.Tensor | None,
    gate_proj: torch.nn.Linear,
    up_proj: torch.nn.Linear,
    down_proj: torch.nn.Linear,
    num_experts: int,
    top_k: int,
    group=None,
) -> torch.Tensor:
    group = group or dist.group.WORLD
    world_size = dist.get_world_size(group)
    rank = dist.get_rank(group)
    local = num_experts // world_size
    x = hidden_states.reshape(-1, hidden_states.size(-1))
    tokens = x.size(0)

    # Router: softmax over all experts, keep the top-k probabilities as weights.
    probs = torch.softmax(F.linear(x, gate_weight, gate_bias), dim=-1)
    routing_weights, selected = torch.topk(probs, top_k, dim=-1)
    routing_map = torch.zeros(num_experts, tokens, dtype=torch.bool, device=x.device)
    routing_map.scatter_(0, selected.T.contiguous(), True)

    # Split sizes: tokens per expert here, then every rank's counts for this rank's experts.
    counts = routing_map.sum(dim=1)  # (E,)
    gathered = counts.new_empty(world_size * num_experts)
    dist.all_gather_into_tensor(gathered, counts, group=group)
    per_local_expert = gathered.view(world_size, num_experts)[:, rank * local : (rank + 1) * local]
    input_splits = counts.view(world_size, local).sum(dim=1).tolist()
    output_splits = per_local_expert.sum(dim=1).tolist()

    # Dispatch: expert-major copies of the tokens, all-to-all, regroup by local expert.
    permutation = torch.arange(tokens, device=x.device).expand(num_experts, -1).masked_select(routing_map)
    received = _all_to_all(x.index_select(0, permutation), output_splits, input_splits, group)
    by_expert = torch.arange(num_experts).reshape(world_size, local).T.ravel().tolist()
    expert_in = _sort_chunks(received, per_local_expert.ravel().tolist(), by_expert)

    expert_out = down_proj(F.silu(gate_proj(expert_in)) * up_proj(expert_in))

    # Combine: back to (source rank, local expert) order, all-to-all home, weighted sum per token.
    by_source = torch.arange(num_experts).reshape(local, world_size).T.ravel().tolist()
    expert_out = _sort_chunks(expert_out, per_local_expert.T.ravel().tolist(), by_source)
    returned = _all_to_all(expert_out, input_splits, output_splits, group)
    weights = routing_weights.new_zeros((tokens, num_experts)).scatter_add_(1, selected, routing_weights)
    weighted = returned * weights.T.contiguous().masked_select(routing_map).unsqueeze(-1)
    out = weighted.new_zeros(x.shape)
    out.scatter_add_(0, permutation.unsqueeze(1).expand(-1, x.size(1)), weighted)
    return out
