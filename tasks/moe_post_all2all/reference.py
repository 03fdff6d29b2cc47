import torch
import torch.distributed as dist

from tasks.moe_pre_all2all.reference import routing_for_all_ranks, split_metadata


def make_inputs(ctx):
    d = ctx.dims
    tokens, hidden, experts, top_k = d["T"], d["H"], d["E"], d["K"]
    choices = routing_for_all_ranks(ctx, tokens, experts, top_k)
    input_splits, output_splits, per_local_expert = split_metadata(choices, experts, ctx.rank)
    selected = choices[ctx.rank].contiguous()  # (T, K)
    routing_map = torch.zeros(experts, tokens, dtype=torch.bool, device=ctx.device)
    routing_map.scatter_(0, selected.T.contiguous(), True)
    token_ids = torch.arange(tokens, device=ctx.device).expand(experts, -1)
    permutation = token_ids.masked_select(routing_map)
    routing_weights = torch.softmax(ctx.randn(tokens, top_k, dtype=torch.float32), dim=-1).to(ctx.dtype)
    expert_outputs = ctx.randn(int(per_local_expert.sum()), hidden)
    return (
        expert_outputs,
        routing_weights,
        selected,
        experts,
        input_splits,
        output_splits,
        per_local_expert,
        routing_map,
        permutation,
        torch.Size([tokens, hidden]),
        None,
    )


def _sort_chunks(x: torch.Tensor, split_sizes: list[int], order: list[int]) -> torch.Tensor:
    chunks = torch.split(x, split_sizes, dim=0)
    return torch.cat([chunks[i] for i in order], dim=0)


@torch.no_grad()
def solution(
    expert_outputs: torch.Tensor,
    routing_weights: torch.Tensor,
    selected_experts: torch.Tensor,
    num_experts: int,
    input_splits,
    output_splits,
    num_global_tokens_per_local_expert: torch.Tensor,
    routing_map: torch.Tensor,
    local_input_permutation_mapping: torch.Tensor,
    org_hidden_states_shape: torch.Size,
    group=None,
) -> torch.Tensor:
    group = group or dist.group.WORLD
    world_size = dist.get_world_size(group)
    local = num_experts // world_size
    input_splits = input_splits.tolist() if isinstance(input_splits, torch.Tensor) else list(input_splits)
    output_splits = output_splits.tolist() if isinstance(output_splits, torch.Tensor) else list(output_splits)

    # Held as (local expert, source rank); the all-to-all wants (source rank, local expert).
    order = torch.arange(num_experts).reshape(local, world_size).T.ravel().tolist()
    by_source = _sort_chunks(expert_outputs, num_global_tokens_per_local_expert.T.ravel().tolist(), order)

    returned = by_source.new_empty((sum(input_splits), by_source.size(1)))
    dist.all_to_all_single(returned, by_source.contiguous(), input_splits, output_splits, group=group)

    # Weight of every routed copy, in the same expert-major order as the permutation.
    weights = routing_weights.new_zeros((routing_weights.size(0), num_experts))
    weights.scatter_add_(1, selected_experts, routing_weights)
    copy_weights = weights.T.contiguous().masked_select(routing_map.bool())
    weighted = returned * copy_weights.unsqueeze(-1)

    out = weighted.new_zeros(org_hidden_states_shape)
    index = local_input_permutation_mapping.unsqueeze(1).expand(-1, out.size(-1))
    out.scatter_add_(0, index, weighted)
    return out
