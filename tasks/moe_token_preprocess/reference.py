import torch
import torch.distributed as dist


def make_inputs(ctx):
    d = ctx.dims
    tokens, experts, top_k = d["T"], d["E"], d["K"]
    # K distinct experts per token, uniformly at random.
    choice = ctx.rand(tokens, experts, dtype=torch.float32).argsort(dim=1)[:, :top_k]
    mask = torch.nn.functional.one_hot(choice, experts).permute(2, 1, 0).to(torch.float32).contiguous()
    return (mask, experts, None)


@torch.no_grad()
def solution(expert_mask: torch.Tensor, num_experts: int, group=None):
    group = group or dist.group.WORLD
    world_size = dist.get_world_size(group)
    rank = dist.get_rank(group)
    local = num_experts // world_size

    tokens_per_expert = expert_mask.sum(dim=(1, 2))  # (E,)
    input_splits = tokens_per_expert.reshape(world_size, local).sum(dim=1).tolist()

    gathered = tokens_per_expert.new_empty(world_size * num_experts)
    dist.all_gather_into_tensor(gathered, tokens_per_expert.contiguous(), group=group)
    per_local_expert = gathered.view(world_size, num_experts)[:, rank * local : (rank + 1) * local].contiguous()
    output_splits = per_local_expert.sum(dim=1).tolist()

    return (
        torch.tensor(input_splits, dtype=torch.long),
        torch.tensor(output_splits, dtype=torch.long),
        per_local_expert.cpu(),
        per_local_expert.sum(dim=0).cpu(),
    )
