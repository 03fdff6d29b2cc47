import torch
import torch.distributed as dist

GRAD_SCALE = 1e-2
# Process groups per (default group, EP size); new_group is collective, so build them once.
_GROUPS: dict[tuple[int, int], tuple] = {}


def ep_groups(world_size: int, ep_size: int, rank: int):
    """(ep_fsdp_group, ep_group) of this rank: EP groups are runs of ep_size consecutive ranks,
    EP-FSDP groups take the same position in every EP group. Every rank creates every group, in
    the same order."""
    key = (id(dist.group.WORLD), ep_size)
    if key not in _GROUPS:
        ep_group = ep_fsdp_group = None
        for start in range(0, world_size, ep_size):
            ranks = list(range(start, start + ep_size))
            group = dist.new_group(ranks)
            if rank in ranks:
                ep_group = group
        for offset in range(ep_size):
            ranks = list(range(offset, world_size, ep_size))
            group = dist.new_group(ranks)
            if rank in ranks:
                ep_fsdp_group = group
        _GROUPS[key] = (ep_fsdp_group, ep_group)
    return _GROUPS[key]


def make_inputs(ctx):
    d = ctx.dims
    w = ctx.world_size
    ep_size = max(1, w // 2)
    ep_fsdp_group, ep_group = ep_groups(w, ep_size, ctx.rank)

    def shards(count):
        shapes = [(d["M"], d["N"]) if i % 2 == 0 else (d["N"], d["M"]) for i in range(count)]
        return [ctx.randn(*shape, scale=GRAD_SCALE) for shape in shapes]

    non_ep, ep = shards(d["L"]), shards(d["LE"])
    per_tensor = d["M"] * d["N"]
    expected_sq = GRAD_SCALE**2 * w * per_tensor * (d["L"] + d["LE"] / ep_size**2)
    max_norm = expected_sq**0.5 * ctx.rand(1, shared=True, dtype=torch.float64, low=0.25, high=0.75).item()
    return (non_ep, ep, max_norm, 2.0, ep_size, dist.group.WORLD, ep_fsdp_group, ep_group)


def _local_pth_power_sum(tensors: list[torch.Tensor], p: float, device) -> torch.Tensor:
    total = torch.zeros((), dtype=torch.float32, device=device)
    for t in tensors:
        total = total + torch.linalg.vector_norm(t.float(), ord=p) ** p
    return total


@torch.no_grad()
def solution(
    non_ep_grad_tensors: list[torch.Tensor],
    ep_grad_tensors: list[torch.Tensor],
    max_norm: float,
    norm_type: float = 2.0,
    ep_size: int = 1,
    fsdp_group=None,
    ep_fsdp_group=None,
    ep_group=None,
) -> torch.Tensor:
    p = float(norm_type)
    non_ep = [t for t in non_ep_grad_tensors if t is not None]
    ep = [t for t in ep_grad_tensors if t is not None]
    device = (non_ep or ep)[0].device
    if ep_size > 1:
        for t in ep:
            t.mul_(1.0 / ep_size)

    non_ep_total = _local_pth_power_sum(non_ep, p, device)
    if fsdp_group is not None:
        dist.all_reduce(non_ep_total, group=fsdp_group)
    ep_total = _local_pth_power_sum(ep, p, device)
    for group in (ep_fsdp_group, ep_group):
        if group is not None:
            dist.all_reduce(ep_total, group=group)

    total_norm = (non_ep_total + ep_total) ** (1.0 / p)
    if total_norm > max_norm:
        coef = max_norm / total_norm
        for t in non_ep + ep:
            t.mul_(coef)
    return total_norm
