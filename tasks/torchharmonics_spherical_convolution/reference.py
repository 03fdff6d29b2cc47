"""A torch equivalent of torch-harmonics' distributed DISCO convolution on the sphere (forward),
written for this suite; the project does not depend on torch-harmonics."""

import torch
import torch.distributed as dist

ENTRIES = 8  # nonzeros of the filter basis per (basis function, output latitude)
SPREAD_LAT = 2  # support: input latitudes within +-SPREAD_LAT of the output latitude
SPREAD_LON = 3  # and longitudes within +-SPREAD_LON of the output longitude

# (azimuth group, polar group) per (default group, azimuth size); new_group is collective.
_GROUPS: dict[tuple[int, int], tuple] = {}


def grid(world_size: int) -> tuple[int, int]:
    """(polar size, azimuth size): two azimuth ranks where the world size is even."""
    azimuth = 2 if world_size % 2 == 0 else 1
    return world_size // azimuth, azimuth


def groups(world_size: int):
    polar, azimuth = grid(world_size)
    key = (id(dist.group.WORLD), azimuth)
    if key not in _GROUPS:
        rank = dist.get_rank()
        az_group = polar_group = None
        for p in range(polar):
            ranks = [p * azimuth + a for a in range(azimuth)]
            group = dist.new_group(ranks)
            if rank in ranks:
                az_group = group
        for a in range(azimuth):
            ranks = [p * azimuth + a for p in range(polar)]
            group = dist.new_group(ranks)
            if rank in ranks:
                polar_group = group
        _GROUPS[key] = (az_group, polar_group)
    return _GROUPS[key]


def filter_basis(ctx, kernel: int, nlat: int, nlon: int) -> torch.Tensor:
    """The whole sphere's basis psi[k, out_lat, in_lat, in_lon] for output longitude 0, dense:
    ENTRIES random local nonzeros per (k, out_lat), the same on every rank."""
    rows = kernel * nlat
    k = torch.arange(kernel, device=ctx.device).repeat_interleave(nlat * ENTRIES)
    out_lat = torch.arange(nlat, device=ctx.device).repeat_interleave(ENTRIES).repeat(kernel)
    in_lat = (out_lat + ctx.randint(-SPREAD_LAT, SPREAD_LAT + 1, rows * ENTRIES, shared=True)).clamp(0, nlat - 1)
    in_lon = ctx.randint(-SPREAD_LON, SPREAD_LON + 1, rows * ENTRIES, shared=True) % nlon
    values = ctx.randn(rows * ENTRIES, shared=True, dtype=torch.float32, scale=ENTRIES**-0.5)
    psi = torch.zeros(kernel, nlat, nlat, nlon, dtype=torch.float32, device=ctx.device)
    return psi.index_put_((k, out_lat, in_lat, in_lon), values, accumulate=True)


def make_inputs(ctx):
    d = ctx.dims
    b, c, kernel, nlat, nlon = d["B"], d["C"], d["K"], d["NLAT"], d["NLON"]
    polar, azimuth = grid(ctx.world_size)
    p = ctx.rank // azimuth
    nl, ml = nlat // polar, nlon // azimuth
    # Outside a process group (offline checks) the groups are left out.
    az_group, polar_group = groups(ctx.world_size) if dist.is_initialized() else (None, None)
    x = ctx.randn(b, c, nl, ml, dtype=torch.float32)  # this rank's latitude and longitude block
    psi = filter_basis(ctx, kernel, nlat, nlon)[:, :, p * nl:(p + 1) * nl].reshape(kernel, nlat, nl * nlon)
    weight = ctx.randn(c, c, kernel, shared=True, dtype=torch.float32, scale=(c * kernel) ** -0.5)
    bias = ctx.randn(c, shared=True, dtype=torch.float32, scale=0.1)
    return (x, psi.contiguous(), weight, 1, nlon, nlon, az_group, polar_group, bias)


def _swap(x: torch.Tensor, split_dim: int, cat_dim: int, group) -> torch.Tensor:
    """Within `group`: split `split_dim` evenly over its ranks, gather theirs along `cat_dim`."""
    n = dist.get_world_size(group)
    if n == 1:
        return x
    send = [t.contiguous() for t in x.chunk(n, dim=split_dim)]
    recv = [torch.empty_like(send[0]) for _ in range(n)]
    dist.all_to_all(recv, send, group=group)
    return torch.cat(recv, dim=cat_dim)


@torch.no_grad()
def solution(x, psi, weight, groups, nlon_out, nlon_in, azimuth_group=None, polar_group=None, bias=None):
    azimuth_group = azimuth_group or dist.group.WORLD
    polar_group = polar_group or dist.group.WORLD
    polar_size = dist.get_world_size(polar_group)
    polar_rank = dist.get_rank(polar_group)

    # Channels split over the azimuth ranks, every longitude here: (B, C/A, nl, nlon_in).
    x = _swap(x, 1, -1, azimuth_group)
    b, c, nl, _ = x.shape
    kernel, nlat_out, _ = psi.shape
    basis = psi.reshape(kernel * nlat_out, nl * nlon_in)
    step = nlon_in // nlon_out

    # Partial contraction over this rank's input latitudes, one output longitude at a time:
    # the basis is fixed at longitude 0 and the input turns under it.
    flat = x.reshape(b * c, nl, nlon_in)
    y = x.new_empty(nlon_out, kernel * nlat_out, b * c)
    for p in range(nlon_out):
        turned = torch.roll(flat, -p * step, dims=-1).reshape(b * c, nl * nlon_in)
        y[p] = basis @ turned.T
    y = y.permute(2, 1, 0).reshape(b, c, kernel, nlat_out, nlon_out)

    # Sum over every input latitude; keep this rank's output latitudes.
    if polar_size > 1:
        y = y.contiguous()
        dist.all_reduce(y, group=polar_group)
        y = y.chunk(polar_size, dim=3)[polar_rank]

    # Back to every channel and this rank's output longitudes, then mix channels per basis function.
    y = _swap(y, -1, 1, azimuth_group)
    cin = y.shape[1] // groups
    y = y.reshape(b, groups, cin, kernel, *y.shape[-2:])
    out = torch.einsum("bgikxy,goik->bgoxy", y, weight.reshape(groups, -1, cin, kernel))
    out = out.reshape(b, -1, *out.shape[-2:])
    if bias is not None:
        out = out + bias.reshape(1, -1, 1, 1)
    return out
