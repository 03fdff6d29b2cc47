import torch
import torch.distributed as dist
import torch.nn.functional as F


def make_inputs(ctx):
    d = ctx.dims
    channels = d["C"]
    x = ctx.randn(d["B"], channels, d["H"] // ctx.world_size, d["W"])
    # One convolution for the whole image: weight and bias are the same on every rank, scaled by
    # the fan-in (C*3*3) for outputs of unit size.
    weight = ctx.randn(channels, channels, 3, 3, shared=True, scale=(9 * channels) ** -0.5)
    bias = ctx.randn(channels, shared=True, scale=0.1)
    return x, weight, bias, 1, 1, None


@torch.no_grad()
def solution(x: torch.Tensor, weight: torch.Tensor, bias, stride: int = 1, padding: int = 1, group=None) -> torch.Tensor:
    """Conv2d of an image split by rows across ranks (rank 0 on top): each rank borrows `padding`
    rows from the neighbour above and below, zeros at the image's top and bottom edges."""
    group = group or dist.group.WORLD
    members = dist.get_process_group_ranks(group)
    rank, world = dist.get_rank(group), len(members)
    halo = int(padding)
    if halo == 0 or world == 1:
        return F.conv2d(x, weight, bias, stride=stride, padding=padding)

    top = x[:, :, :halo].contiguous()
    bottom = x[:, :, -halo:].contiguous()
    above = torch.zeros_like(bottom)
    below = torch.zeros_like(top)
    ops = []
    if rank > 0:
        ops.append(dist.P2POp(dist.isend, top, members[rank - 1], group))
        ops.append(dist.P2POp(dist.irecv, above, members[rank - 1], group))
    if rank < world - 1:
        ops.append(dist.P2POp(dist.isend, bottom, members[rank + 1], group))
        ops.append(dist.P2POp(dist.irecv, below, members[rank + 1], group))
    for request in dist.batch_isend_irecv(ops):
        request.wait()

    # Rows come from the neighbours; columns are zero-padded by the convolution itself.
    padded = torch.cat([above, x, below], dim=2)
    return F.conv2d(padded, weight, bias, stride=stride, padding=(0, padding))
