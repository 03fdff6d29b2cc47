import torch
import torch.distributed as dist


def make_inputs(ctx):
    d = ctx.dims
    x = ctx.randn(d["B"], d["T"], d["NH"], d["D"])
    unpadded = ctx.world_size * d["T"] - d["P"] if d["P"] else 0
    return (x, 1, 2, None, unpadded)


def _all_to_all(x: torch.Tensor, scatter_dim: int, gather_dim: int, group) -> torch.Tensor:
    world_size = dist.get_world_size(group)
    # Block i of the scatter dim goes to rank i; one all_to_all_single over the stacked blocks
    # (list-form all_to_all fails on CUDA gloo).
    send = torch.stack(torch.tensor_split(x, world_size, dim=scatter_dim)).contiguous()
    recv = torch.empty_like(send)
    dist.all_to_all_single(recv, send, group=group)
    return torch.cat(recv.unbind(0), dim=gather_dim).contiguous()


@torch.no_grad()
def solution(x: torch.Tensor, seq_dim: int, head_dim: int, group=None, unpadded_dim_size: int = 0) -> torch.Tensor:
    group = group or dist.group.WORLD
    world_size = dist.get_world_size(group)
    x = _all_to_all(x, scatter_dim=head_dim, gather_dim=seq_dim, group=group)
    if unpadded_dim_size and unpadded_dim_size % world_size != 0:
        x = x.narrow(seq_dim, 0, unpadded_dim_size)
    return x
