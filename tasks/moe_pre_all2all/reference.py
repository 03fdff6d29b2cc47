import torch
import torch.distributed as dist


def routing_for_all_ranks(ctx, tokens: int, experts: int, top_k: int) -> torch.Tensor:
    """(W, T, K) expert choices of every rank's tokens (K distinct experts per token, uniform),
    identical on every rank so that each can derive the split sizes the dispatcher would have
    exchanged."""
    scores = ctx.rand(ctx.world_size, tokens, experts, shared=True, dtype=torch.float32)
    return scores.argsort(dim=2)[:, :, :top_k]


def split_metadata(choices: torch.Tensor, experts: int, rank: int):
    """input_splits, output_splits and the (W, L) per-source token counts of rank's experts."""
    world_size = choices.size(0)
    local = experts // world_size
    counts = torch.nn.functional.one_hot(choices, experts).sum(dim=(1, 2))  # (W, E)
    input_splits = counts[rank].view(world_size, local).sum(dim=1).tolist()
    per_local_expert = counts[:, rank * local : (rank + 1) * local].contiguous()
    output_splits = per_local_expert.sum(dim=1).tolist()
    return input_splits, output_splits, per_local_expert


def make_inputs(ctx):
    d = ctx.dims
    choices = routing_for_all_ranks(ctx, d["T"], d["E"], d["K"])
    input_splits, output_splits, per_local_expert = split_metadata(choices, d["E"], ctx.rank)
    expert_mask = torch.nn.functional.one_hot(choices[ctx.rank], d["E"]).permute(2, 1, 0).to(torch.float32).contiguous()
    hidden_states = ctx.randn(d["T"], d["H"])
    return (hidden_states, expert_mask, d["E"], input_splits, output_splits, per_local_expert, None)


def _sort_chunks(x: torch.Tensor, split_sizes: list[int], order: list[int]) -> torch.Tensor:
    chunks = torch.split(x, split_sizes, dim=0)
    return torch.cat([chunks[i] for i in order], dim=0)


@torch.no_grad()
def solution(
    hidden_states: torch.Tensor,
    expert_mask: torch.Tensor,
    num_experts: int,
    input_splits,
    output_splits,
    num_global_tokens_per_local_expert: torch.Tensor,
    group=None,
):
    group = group or dist.group.WORLD
    world_size = dist.get_world_size(group)
    local = num_experts // world_size
    input_splits = input_splits.tolist() if isinstance(input_splits, torch.Tensor) else list(input_splits)
    output_splits = output_splits.tolist() if isinstance(output_splits, torch.Tensor) else list(output_splits)

    hidden_states = hidden_states.reshape(-1, hidden_states.size(-1))
    org_shape = hidden_states.shape
    routing_map = expert_mask.sum(dim=1)  # (E, T)

    # Expert-major copy of every routed token: rows for expert 0 first, each in token order.
    token_ids = torch.arange(org_shape[0], device=hidden_states.device).expand(num_experts, -1)
    permutation = token_ids.masked_select(routing_map.bool())
    permuted = hidden_states.index_select(0, permutation)
    if permuted.size(0) != sum(input_splits):
        raise RuntimeError(f"split mismatch: input_splits sum {sum(input_splits)} != {permuted.size(0)} routed tokens")

    received = permuted.new_empty((sum(output_splits), permuted.size(1)))
    dist.all_to_all_single(received, permuted.contiguous(), output_splits, input_splits, group=group)

    # Arrival order is (source rank, local expert); regroup as (local expert, source rank).
    order = torch.arange(num_experts).reshape(world_size, local).T.ravel().tolist()
    grouped = _sort_chunks(received, num_global_tokens_per_local_expert.ravel().tolist(), order)
    return grouped, routing_map, permutation, org_shape
