import torch
import torch.distributed as dist


def make_inputs(ctx):
    d = ctx.dims
    return (ctx.randn(d["B"], d["T"], d["NH"], d["D"]), 1, 2, None)


def _all_to_all(x: torch.Tensor, scatter_dim: int, gather_dim: int, group) -> torch.Tensor:
    world_size = dist.get_world_size(group)
    # Block i of the scatter dim goes to rank i; one all_to_all_single over the stacked blocks
    # (list-form all_to_all fails on CUDA gloo).
    send = torch.stack(torch.tensor_split(x, world_size, dim=scatter_dim)).contiguous()
    recv = torch.empty_like(send)
    dist.all_to_all_single(recv, send, group=group)
    return torch.cat(recv.unbind(0), dim=gather_dim).contiguous()


@torch.no_grad()
def solution(x: torch.Tensor, seq_dim: int, head_dim: int, group=None) -> torch.Tensor:
    group = group or dist.group.WORLD
    world_size = dist.get_world_size(group)
    padding = -x.size(seq_dim) % world_size
    if padding:
        pad_shape = list(x.shape)
        pad_shape[seq_dim] = padding
        x = torch.cat([x, x.new_zeros(pad_shape)], dim=seq_dim)
    return _all_to_all(x, scatter_dim=seq_dim, gather_dim=head_dim, group=group)
