import torch
import torch.distributed as dist


def make_inputs(ctx):
    d = ctx.dims
    return (ctx.randn(d["M"], d["N"]), d["scatter_dim"], d["gather_dim"], None)


@torch.no_grad()
def solution(x: torch.Tensor, scatter_dim: int, gather_dim: int, group=None) -> torch.Tensor:
    group = group or dist.group.WORLD
    world_size = dist.get_world_size(group)
    if world_size == 1:
        return x.contiguous()
    # Block i of the scatter dimension goes to rank i. Stacking the blocks on a new leading dim
    # lets one all_to_all_single carry them (list-form all_to_all fails on CUDA gloo).
    send = torch.stack(torch.tensor_split(x, world_size, dim=scatter_dim)).contiguous()
    recv = torch.empty_like(send)
    dist.all_to_all_single(recv, send, group=group)
    return torch.cat(recv.unbind(0), dim=gather_dim).contiguous()
