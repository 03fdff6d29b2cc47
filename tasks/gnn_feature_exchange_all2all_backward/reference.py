import torch
import torch.distributed as dist


def count_matrix(ctx, rows: int) -> torch.Tensor:
    """(W, W) int64, the same on every rank: entry [s, d] rows go from rank s to rank d. Each row
    cuts `rows` at W-1 uniform random points."""
    w = ctx.world_size
    cuts = ctx.randint(0, rows + 1, w, w - 1, shared=True).sort(dim=1).values.cpu()
    edges = torch.cat([torch.zeros(w, 1, dtype=torch.int64), cuts, torch.full((w, 1), rows)], dim=1)
    return edges.diff(dim=1)


def make_inputs(ctx):
    n, h = ctx.dims["N"], ctx.dims["H"]
    w, r = ctx.world_size, ctx.rank
    counts = count_matrix(ctx, n)
    peers = [(r + c) % w for c in range(w)]
    counts_sent = [int(counts[r, p]) for p in peers]
    counts_received = [int(counts[p, r]) for p in peers]
    seed_size = n // 2
    grad_output = ctx.randn(n, h, dtype=torch.float32)
    seed_inverse_ids = ctx.randint(0, seed_size, sum(counts_received))
    return (grad_output, seed_inverse_ids, seed_size, counts_sent, counts_received, None)


@torch.no_grad()
def solution(grad_output, seed_inverse_ids, seed_size, counts_sent, counts_received, group=None):
    group = group or dist.group.WORLD
    rank = dist.get_rank(group)
    world_size = dist.get_world_size(group)
    # Chunk c concerns rank (rank + c) mod W; all_to_all_single wants chunks in rank order.
    order = [(p - rank) % world_size for p in range(world_size)]
    send_chunks = torch.split(grad_output, counts_sent)
    send = torch.cat([send_chunks[c] for c in order])
    recv_sizes = [counts_received[c] for c in order]
    recv = grad_output.new_empty((sum(counts_received), grad_output.shape[1]))
    dist.all_to_all_single(recv, send, output_split_sizes=recv_sizes,
                           input_split_sizes=[counts_sent[c] for c in order], group=group)
    by_rank = torch.split(recv, recv_sizes)
    arrived = torch.cat([by_rank[(rank + c) % world_size] for c in range(world_size)])
    grad = grad_output.new_zeros((seed_size, grad_output.shape[1]))
    return grad.index_add_(0, seed_inverse_ids, arrived)
