import math

import torch
import torch.distributed as dist
import torch.nn.functional as F

# The public suite's tiling: 3 latent frames by L x L latent pixels per tile, a quarter of each tile's
# height and width overlapping its neighbour, no temporal overlap, 4x temporal and 8x spatial
# upsampling by the stand-in decoder.
TILE_FRAMES = 3
SPATIAL_OVERLAP = 0.25
TEMPORAL_OVERLAP = 0.0
SPATIAL_UP = 8
TEMPORAL_UP = 4
RGB = 3


def make_inputs(ctx):
    """One latent video (B, C, T, H, W), the same on every rank (each rank decodes a share of its
    tiles), and the tiling arguments in the public suite's order."""
    d = ctx.dims
    z = ctx.randn(d["B"], d["C"], d["T"], d["H"], d["W"], shared=True)
    return (z, TILE_FRAMES, d["L"], d["L"], SPATIAL_OVERLAP, TEMPORAL_OVERLAP, SPATIAL_UP, TEMPORAL_UP, 1, False, None)


class Tiling:
    """Where each tile of the latent lies, how far its decoded neighbours overlap it and how much of
    it the output keeps, per axis (time, height, width)."""

    def __init__(self, latent_sizes, size, overlap, up):
        self.sizes = tuple(latent_sizes)
        self.size = tuple(size)
        self.up = tuple(up)
        self.stride = tuple(int(n * (1.0 - o)) for n, o in zip(size, overlap))
        if min(self.stride) <= 0:
            raise ValueError("tile overlap factors must leave a positive stride")
        decoded = [n * u for n, u in zip(size, up)]
        self.blend = tuple(int(n * o) for n, o in zip(decoded, overlap))
        self.keep = tuple(n - b for n, b in zip(decoded, self.blend))
        self.counts = tuple(math.ceil(n / s) for n, s in zip(self.sizes, self.stride))

    def index(self, flat: int) -> tuple[int, int, int]:
        _, nh, nw = self.counts
        return flat // (nh * nw), (flat // nw) % nh, flat % nw

    def latent_slice(self, axis: int, i: int) -> slice:
        start = i * self.stride[axis]
        return slice(start, min(start + self.size[axis], self.sizes[axis]))

    def decoded_len(self, axis: int, i: int) -> int:
        s = self.latent_slice(axis, i)
        return (s.stop - s.start) * self.up[axis]

    def kept_len(self, axis: int, i: int) -> int:
        return min(self.keep[axis], self.decoded_len(axis, i))

    def offset(self, axis: int, i: int) -> int:
        return sum(self.kept_len(axis, j) for j in range(i))

    def total(self, axis: int) -> int:
        return self.offset(axis, self.counts[axis])


def decode(z: torch.Tensor, tiling: Tiling, idx) -> torch.Tensor:
    """The stand-in decoder on one tile, in fp32: trilinear upsampling (half-pixel centres, edges
    clamped at the tile's own border) of its latent slice, keeping RGB channels (cycled if fewer)."""
    part = z[(slice(None), slice(None), *(tiling.latent_slice(a, i) for a, i in enumerate(idx)))]
    up = F.interpolate(part.float(), scale_factor=tiling.up, mode="trilinear", align_corners=False)
    if up.shape[1] < RGB:
        up = up.repeat(1, math.ceil(RGB / up.shape[1]), 1, 1, 1)
    return up[:, :RGB]


def blend_into(cur: torch.Tensor, prev: torch.Tensor, axis: int, extent: int) -> None:
    """Cross-fade the first e positions of `cur` along `axis` (dim 2 + axis) from the last e of
    `prev`: weight i/e on cur, 1 - i/e on prev, e = min(extent, both lengths)."""
    dim = 2 + axis
    e = min(extent, prev.shape[dim], cur.shape[dim])
    if e <= 0:
        return
    shape = [1] * cur.dim()
    shape[dim] = e
    w = (torch.arange(e, dtype=torch.float64, device=cur.device) / e).to(cur.dtype).view(shape)
    head = cur.narrow(dim, 0, e)
    head.copy_(prev.narrow(dim, prev.shape[dim] - e, e) * (1.0 - w) + head * w)


def blended_tile(z: torch.Tensor, tiling: Tiling, idx, cache: dict) -> torch.Tensor:
    """Tile idx decoded, cross-faded with its time, height and width predecessors' decoded (not
    blended) tiles in that order, cut to the part the output keeps (fp32)."""

    def decoded(key):
        if key not in cache:
            cache[key] = decode(z, tiling, key)
        return cache[key]

    cur = decoded(tuple(idx)).clone()
    for axis in range(3):
        if idx[axis] > 0:
            prev = list(idx)
            prev[axis] -= 1
            blend_into(cur, decoded(tuple(prev)), axis, tiling.blend[axis])
    return cur[:, :, : tiling.keep[0], : tiling.keep[1], : tiling.keep[2]]


def kept_shape(batch: int, tiling: Tiling, idx) -> tuple[int, ...]:
    return (batch, RGB, *(tiling.kept_len(a, i) for a, i in enumerate(idx)))


@torch.no_grad()
def solution(
    z,
    tile_latent_min_length,
    tile_latent_min_height,
    tile_latent_min_width,
    spatial_tile_overlap_factor,
    temporal_tile_overlap_factor,
    spatial_upsample,
    temporal_upsample,
    sr_ratio=1,
    first_frame_as_image=False,
    group=None,
):
    """MAGI-1's tile-parallel VAE decode: the latent video is cut into overlapping tiles, the ranks
    decode their tiles (round-robin over the tiles in time, height, width order), cross-fade each
    with its predecessors and all-gather the kept parts; every rank returns the whole video
    (B, 3, T', H', W') in bf16."""
    group = group or dist.group.WORLD
    rank, world = dist.get_rank(group), dist.get_world_size(group)
    spatial = spatial_upsample * sr_ratio
    tiling = Tiling(
        z.shape[2:],
        (tile_latent_min_length + int(first_frame_as_image), tile_latent_min_height, tile_latent_min_width),
        (temporal_tile_overlap_factor, spatial_tile_overlap_factor, spatial_tile_overlap_factor),
        (temporal_upsample, spatial, spatial),
    )
    batch, n_tiles = z.shape[0], math.prod(tiling.counts)
    owned = [list(range(r, n_tiles, world)) for r in range(world)]
    sizes = [sum(math.prod(kept_shape(batch, tiling, tiling.index(t))) for t in tiles) for tiles in owned]

    # Each rank decodes its tiles and the predecessors they blend with (the latent is everywhere),
    # so the only exchange is the kept parts: one all-gather, padded to the largest share.
    cache: dict = {}
    mine = [blended_tile(z, tiling, tiling.index(t), cache).reshape(-1) for t in owned[rank]]
    send = torch.zeros(max(sizes), dtype=torch.bfloat16, device=z.device)
    if mine:
        send[: sizes[rank]] = torch.cat(mine).to(torch.bfloat16)
    gathered = torch.empty(world * max(sizes), dtype=torch.bfloat16, device=z.device)
    dist.all_gather_into_tensor(gathered, send, group=group)

    out = torch.empty(batch, RGB, *(tiling.total(a) for a in range(3)), dtype=torch.bfloat16, device=z.device)
    for r, tiles in enumerate(owned):
        at = r * max(sizes)
        for t in tiles:
            idx = tiling.index(t)
            shape = kept_shape(batch, tiling, idx)
            block = gathered[at : at + math.prod(shape)].view(shape)
            at += math.prod(shape)
            region = [slice(tiling.offset(a, i), tiling.offset(a, i) + shape[2 + a]) for a, i in enumerate(idx)]
            out[(slice(None), slice(None), *region)] = block
    return out
