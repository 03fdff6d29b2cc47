import torch
import torch.distributed as dist
import torch.nn.functional as F

from tasks.magi1_cso_async_attention.problem import tokens_per_range


def make_inputs(ctx):
    d = ctx.dims
    ranges, chunk, hq, hkv, hd = d["R"], d["CHUNK"], d["HQ"], d["HKV"], d["D"]
    local = ranges * tokens_per_range(d, ctx.world_size)
    query = ctx.randn(local, hq, hd)
    key_value = torch.cat([ctx.randn(local, hkv, hd), ctx.randn(local, hkv, hd)], dim=-1)
    # Each range's queries attend one window of CHUNK consecutive keys of the range-ordered key
    # sequence (R*CHUNK keys), at a random start: the same windows on every rank.
    starts = ctx.randint(0, (ranges - 1) * chunk + 1, ranges, shared=True)
    k_ranges = torch.stack([starts, starts + chunk], dim=1)
    return (query, key_value, k_ranges, ranges, chunk, None)


def _all_to_all(x: torch.Tensor, group, async_op: bool = False):
    """x (W, ...): block p goes to rank p; the result's block r came from rank r."""
    x = x.contiguous()
    out = torch.empty_like(x)
    work = dist.all_to_all_single(out, x, group=group, async_op=async_op)
    return (out, work) if async_op else out


def _key_values_by_range(key_value, world: int, ranges: int, clip: int, group) -> torch.Tensor:
    """All-to-all the key/values from all heads of this rank's tokens to this rank's heads of every
    token; then lay them out range by range, each range's tokens in rank order, clipped to its
    first `clip` tokens: (ranges*clip, local kv heads, 2*D)."""
    tokens, hkv, width = key_value.shape
    if hkv >= world:
        per = hkv // world
        owned = torch.arange(hkv, device=key_value.device).view(world, per)
    else:  # fewer kv heads than ranks: each serves W/HKV ranks
        per = 1
        owned = torch.arange(world, device=key_value.device).div(world // hkv, rounding_mode="floor").view(world, 1)
    send = key_value[:, owned.reshape(-1)].view(tokens, world, per, width).transpose(0, 1)
    recv = _all_to_all(send, group)  # (source rank, tokens, per, width)
    spb = tokens // ranges
    by_range = recv.view(world, ranges, spb, per, width).transpose(0, 1).reshape(ranges, world * spb, per, width)
    return by_range[:, :clip].reshape(ranges * clip, per, width)


@torch.no_grad()
def solution(query, key_value, k_ranges, cp_shuffle_num, clip_token_nums=None, group=None):
    group = group or dist.group.WORLD
    world = dist.get_world_size(group)
    ranges = int(cp_shuffle_num)
    tokens, hq, hd = query.shape
    spb = tokens // ranges
    clip = int(clip_token_nums or world * spb)
    local_q = hq // world
    bounds = k_ranges.tolist()

    kv = _key_values_by_range(key_value, world, ranges, clip, group)
    # Range i's queries: this rank's spb tokens of every head -> every rank's tokens of local_q
    # heads. The all-to-alls of range i+1's queries and of range i's output run while range i
    # is attended.
    blocks = query.view(ranges, spb, world, local_q, hd).transpose(1, 2)  # (range, dest, spb, heads, D)
    pending = _all_to_all(blocks[0], group, async_op=True)
    sent = []
    for i in range(ranges):
        q_i, work = pending
        work.wait()
        if i + 1 < ranges:
            pending = _all_to_all(blocks[i + 1], group, async_op=True)
        start, end = bounds[i]
        keys = kv[start:end, :, :hd].transpose(0, 1).unsqueeze(0)
        values = kv[start:end, :, hd:].transpose(0, 1).unsqueeze(0)
        q_heads = q_i.reshape(world * spb, local_q, hd).transpose(0, 1).unsqueeze(0)
        out = F.scaled_dot_product_attention(q_heads, keys, values, enable_gqa=True)
        out = out.squeeze(0).transpose(0, 1).reshape(world, spb, local_q, hd)  # (dest rank, spb, heads, D)
        sent.append(_all_to_all(out, group, async_op=True))
    # Back to this rank's tokens with every head: block r of each result holds rank r's heads.
    outs = []
    for out, work in sent:
        work.wait()
        outs.append(out.transpose(0, 1).reshape(spb, hq, hd))
    return torch.cat(outs, dim=0)
