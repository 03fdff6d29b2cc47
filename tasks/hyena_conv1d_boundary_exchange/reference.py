import torch
import torch.distributed as dist
import torch.nn.functional as F


def make_inputs(ctx):
    d = ctx.dims
    x = ctx.randn(d["B"], d["H"], 2 * d["S"])
    # One filter for the whole sequence, so every rank holds the same taps; variance 1/K keeps the
    # outputs of unit size.
    weight = ctx.randn(d["H"], 1, d["K"], shared=True, scale=d["K"] ** -0.5)
    return x, weight, None


@torch.no_grad()
def solution(x: torch.Tensor, weight: torch.Tensor, group=None) -> torch.Tensor:
    group = group or dist.group.WORLD
    members = dist.get_process_group_ranks(group)
    rank, world = dist.get_rank(group), len(members)
    batch = x.shape[0]
    chunk = x.shape[-1] // 2
    halo = weight.shape[-1] - 1
    early, late = x[..., :chunk], x[..., chunk:]
    early_tail = early[..., chunk - halo :].contiguous()
    late_tail = late[..., chunk - halo :].contiguous()

    # The early chunk (index r) continues rank r-1's early chunk; the late one (index 2W-1-r)
    # continues rank r+1's late chunk. The sequence starts with zeros on rank 0, and the last
    # rank's late chunk follows its own early one.
    before_early = torch.zeros_like(early_tail)
    before_late = early_tail
    ops = []
    if halo and rank > 0:
        ops.append(dist.P2POp(dist.irecv, before_early, members[rank - 1], group))
        ops.append(dist.P2POp(dist.isend, late_tail, members[rank - 1], group))
    if halo and rank < world - 1:
        before_late = torch.empty_like(late_tail)
        ops.append(dist.P2POp(dist.isend, early_tail, members[rank + 1], group))
        ops.append(dist.P2POp(dist.irecv, before_late, members[rank + 1], group))
    if ops:
        for request in dist.batch_isend_irecv(ops):
            request.wait()

    # Both chunks stacked on the batch axis go through one grouped conv.
    padded = torch.cat([torch.cat([before_early, early], dim=-1), torch.cat([before_late, late], dim=-1)])
    y = F.conv1d(padded, weight, groups=weight.shape[0])
    return torch.cat([y[:batch], y[batch:]], dim=-1)
