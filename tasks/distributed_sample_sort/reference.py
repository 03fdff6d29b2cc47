import torch
import torch.distributed as dist


def make_inputs(ctx):
    """About N values per rank (N/2 to 3N/2), Gaussian around a per-rank offset so the ranks'
    ranges overlap unevenly; in one draw of four a random subset of ranks (never all) holds none."""
    n = ctx.dims["N"]
    size = int(ctx.randint(n // 2, n + n // 2 + 1, 1).item())
    if float(ctx.rand(1, dtype=torch.float32, shared=True).item()) < 0.25:
        keys = ctx.rand(ctx.world_size, dtype=torch.float32, shared=True)
        empty = keys < 0.5
        empty[keys.argmax()] = False
        if bool(empty[ctx.rank]):
            size = 0
    offset = float(ctx.randn(1, dtype=torch.float32).item()) * 2.0
    return ctx.randn(size, dtype=torch.float32).add_(offset).to(ctx.dtype), None


def _exchange(chunks: list[torch.Tensor], group) -> torch.Tensor:
    """Variable all-to-all: chunks[d] goes to rank d; returns what every rank sent here, in rank
    order."""
    like = chunks[0]
    send_counts = torch.tensor([c.numel() for c in chunks], dtype=torch.long, device=like.device)
    recv_counts = torch.empty_like(send_counts)
    dist.all_to_all_single(recv_counts, send_counts, group=group)
    received = like.new_empty(int(recv_counts.sum()))
    dist.all_to_all_single(received, torch.cat(chunks), output_split_sizes=recv_counts.tolist(),
                           input_split_sizes=send_counts.tolist(), group=group)
    return received


@torch.no_grad()
def solution(local_shard: torch.Tensor, group=None) -> torch.Tensor:
    """Sample sort: sort locally, pick W-1 splitters from W regular samples per rank, send each
    value to the rank of its bucket, sort what arrives, then even the counts out so that rank r
    holds elements [r*n/W, (r+1)*n/W) of the sorted whole (the first n mod W ranks one more)."""
    group = group or dist.group.WORLD
    world, rank = dist.get_world_size(group), dist.get_rank(group)
    ordered = local_shard.sort().values

    # Regular samples: W per rank (none from an empty rank), gathered with their count.
    n, device = ordered.numel(), ordered.device
    picks = (torch.arange(1, world + 1, device=device) * n) // (world + 1)
    samples = torch.zeros(world + 1, dtype=torch.float32, device=device)
    samples[0] = float(min(n, world))
    if n:
        samples[1:] = ordered[picks.clamp(max=n - 1)].float()
    everyone = torch.empty(world, world + 1, dtype=torch.float32, device=device)
    dist.all_gather_into_tensor(everyone.view(-1), samples, group=group)
    pool = torch.cat([row[1:] for row in everyone if row[0] > 0]).sort().values
    splitters = pool[(torch.arange(1, world, device=device) * pool.numel()) // world]

    # Bucket b holds the values in (splitter b-1, splitter b].
    bounds = torch.searchsorted(ordered.float(), splitters, right=True).tolist()
    edges = [0, *bounds, n]
    merged = _exchange([ordered[edges[d]:edges[d + 1]] for d in range(world)], group).sort().values

    # Even out: this rank's bucket covers global positions [before, before + len); rank d wants
    # [start_d, stop_d).
    sizes = torch.empty(world, dtype=torch.long, device=device)
    dist.all_gather_into_tensor(sizes, torch.tensor([merged.numel()], device=device), group=group)
    total, before = int(sizes.sum()), int(sizes[:rank].sum())
    base, extra = divmod(total, world)
    chunks = []
    for d in range(world):
        start = d * base + min(d, extra)
        stop = start + base + (1 if d < extra else 0)
        lo, hi = max(start, before), min(stop, before + merged.numel())
        chunks.append(merged[lo - before:hi - before] if lo < hi else merged[:0])
    return _exchange(chunks, group)
