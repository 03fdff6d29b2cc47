import torch
import torch.distributed as dist


def make_inputs(ctx):
    d = ctx.dims
    b, c, s, f, gd = d["B"], d["C"], d["S"], d["F"], d["GD"]
    x1 = ctx.randn(b, c, s)
    x2 = ctx.randn(b, c, s)
    v = ctx.randn(b, c, s)
    # Long filters as Hyena's implicit ones: random taps under an exponential decay (a few hundred
    # taps long at most), scaled to unit energy so that the convolution keeps unit variance.
    taps = torch.arange(f, device=ctx.device, dtype=torch.float32)
    decay = torch.exp(-taps / min(f / 4, 256.0))
    h = ctx.randn(c // gd, f, shared=True, dtype=torch.float32) * decay
    h = (h / h.square().sum(-1, keepdim=True).sqrt()).to(ctx.dtype)
    bias = ctx.randn(c, shared=True)
    return (x1, x2, v, h, bias, c // gd, gd, None, True)


def _zigzag_order(world: int, device) -> torch.Tensor:
    """Chunk positions in the gathered sequence: rank r sends chunks r and 2W-1-r (in that order),
    so gathered position 2r holds chunk r and 2r+1 holds chunk 2W-1-r."""
    order = torch.empty(2 * world, dtype=torch.long, device=device)
    order[0::2] = torch.arange(world, device=device)
    order[1::2] = torch.arange(2 * world - 1, world - 1, -1, device=device)
    return order


def _seq_to_channels(x: torch.Tensor, group, zigzag: bool) -> torch.Tensor:
    """(B, C, S) sequence-sharded -> (B, C/W, W*S) channel-sharded, in sequence order."""
    world = dist.get_world_size(group)
    b, c, s = x.shape
    send = x.reshape(b, world, c // world, s).transpose(0, 1).contiguous()
    recv = torch.empty_like(send)
    dist.all_to_all_single(recv, send, group=group)
    full = recv.permute(1, 2, 0, 3).reshape(b, c // world, world * s)
    if zigzag:
        chunks = full.reshape(b, c // world, 2 * world, s // 2)
        natural = torch.empty_like(chunks)
        natural[:, :, _zigzag_order(world, x.device)] = chunks
        full = natural.reshape(b, c // world, world * s)
    return full


def _channels_to_seq(y: torch.Tensor, group, zigzag: bool) -> torch.Tensor:
    """(B, C/W, L) channel-sharded, in sequence order -> (B, C, L/W) sequence-sharded."""
    world = dist.get_world_size(group)
    b, c_local, length = y.shape
    if zigzag:
        y = y.reshape(b, c_local, 2 * world, length // (2 * world))[:, :, _zigzag_order(world, y.device)]
    send = y.reshape(b, c_local, world, length // world).permute(2, 0, 1, 3).contiguous()
    recv = torch.empty_like(send)
    dist.all_to_all_single(recv, send, group=group)
    return recv.transpose(0, 1).reshape(b, world * c_local, length // world)


@torch.no_grad()
def solution(x1_seq, x2_seq, v_seq, h, conv_bias, num_groups, group_dim, group=None, with_zigzag_splitting=True):
    group = group or dist.group.WORLD
    world, rank = dist.get_world_size(group), dist.get_rank(group)
    zigzag = with_zigzag_splitting

    # Sequence-sharded -> channel-sharded: each rank gets C/W channels of the whole sequence.
    x1, x2, v = (_seq_to_channels(t, group, zigzag) for t in (x1_seq, x2_seq, v_seq))
    channels, length = x1.shape[1], x1.shape[2]
    groups = num_groups // world
    filters = h[rank * groups : (rank + 1) * groups].repeat_interleave(group_dim, dim=0).float()
    bias = conv_bias[rank * channels : (rank + 1) * channels].float().unsqueeze(-1)

    # Gate, causal long convolution by FFT (zero-padded to 2L, fp32), skip term, gate.
    u = (x2 * v).float()
    n = 2 * length
    spectrum = torch.fft.rfft(u, n=n) * torch.fft.rfft(filters, n=n)
    y = torch.fft.irfft(spectrum, n=n)[..., :length] + u * bias
    z = x1 * y.to(x1.dtype)

    # Channel-sharded -> sequence-sharded, laid out (B, S, C).
    return _channels_to_seq(z, group, zigzag).transpose(1, 2).contiguous()
