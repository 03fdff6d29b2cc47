import torch
import torch.distributed as dist


def make_inputs(ctx):
    d = ctx.dims
    v, s, deg = d["V"], d["S"], d["DEG"]
    # A random directed graph in CSC form, the same on every rank: node v's in-neighbours are
    # row[colptr[v]:colptr[v+1]], 1 to 2*DEG - 1 of them, in random order.
    degree = ctx.randint(1, 2 * deg, v, shared=True)
    colptr = torch.cat([degree.new_zeros(1), torch.cumsum(degree, 0)])
    true_row = ctx.randint(0, v, int(colptr[-1]), shared=True)
    node_to_rank = ctx.randint(0, ctx.world_size, v, shared=True)
    # A rank knows only the neighbour lists of the nodes it owns; the rest of its copy is junk.
    owned = (node_to_rank == ctx.rank).repeat_interleave(degree)
    row = torch.where(owned, true_row, ctx.randint(0, v, true_row.numel()))
    seeds = ctx.randperm(v)[:s]  # distinct on each rank
    return (seeds, [d["F1"], d["F2"]], colptr, row, node_to_rank, None, False)


def _segments(starts: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """starts[i], starts[i] + 1, ..., starts[i] + lengths[i] - 1, concatenated over i."""
    total = int(lengths.sum())
    offsets = torch.cumsum(lengths, 0) - lengths
    within = torch.arange(total, device=starts.device) - offsets.repeat_interleave(lengths, output_size=total)
    return starts.repeat_interleave(lengths, output_size=total) + within


def _all_to_all(x: torch.Tensor, recv: list[int], send: list[int], group) -> torch.Tensor:
    out = x.new_empty(sum(recv))
    dist.all_to_all_single(out, x, output_split_sizes=recv, input_split_sizes=send, group=group)
    return out


def _new_nodes(node: torch.Tensor, candidates: torch.Tensor) -> torch.Tensor:
    """The distinct candidates not in `node`, in order of first appearance."""
    combined = torch.cat([node, candidates])
    uniq, inverse = torch.unique(combined, return_inverse=True)
    position = torch.arange(combined.numel(), device=combined.device)
    first = torch.full_like(uniq, combined.numel()).scatter_reduce_(0, inverse, position, "amin")
    first = first.sort().values
    return combined[first[first >= node.numel()]]


@torch.no_grad()
def solution(seed_nodes, fanouts, local_adj_row_ptr, local_adj_col, node_to_rank, group=None, replace=False):
    group = group or dist.group.WORLD
    world = dist.get_world_size(group)
    colptr, row = local_adj_row_ptr, local_adj_col
    node = seed_nodes.clone()
    src = node
    picked, dst, edges = [], [], []
    for fanout in fanouts:
        # Ask each frontier node's owner for its sample (requests grouped by owner).
        owner = node_to_rank[src]
        order = torch.argsort(owner, stable=True)
        send_counts = torch.bincount(owner, minlength=world)
        recv_counts = torch.empty_like(send_counts)
        dist.all_to_all_single(recv_counts, send_counts, group=group)
        send, recv = send_counts.tolist(), recv_counts.tolist()
        asked = _all_to_all(src[order], recv, send, group)

        # The owner's sample: the first min(fanout, degree) in-neighbours in stored order.
        start = colptr[asked]
        take = torch.clamp(colptr[asked + 1] - start, max=fanout)
        eid = _segments(start, take)
        per_peer = [int(t.sum()) for t in torch.split(take, recv)]
        back_take = _all_to_all(take, send, recv, group)
        back_counts = [int(t.sum()) for t in torch.split(back_take, send)]
        back_nbr = _all_to_all(row[eid], back_counts, per_peer, group)
        back_eid = _all_to_all(eid, back_counts, per_peer, group)

        # Replies arrive grouped by owner; put them back in frontier order.
        back_start = torch.empty_like(back_take)
        back_start[order] = torch.cumsum(back_take, 0) - back_take
        count = torch.empty_like(back_take)
        count[order] = back_take
        where = _segments(back_start, count)
        picked.append(back_nbr[where])
        edges.append(back_eid[where])
        dst.append(src.repeat_interleave(count))

        src = _new_nodes(node, picked[-1])
        node = torch.cat([node, src])

    # Relabel to positions in `node`.
    local = torch.full((int(node.max()) + 1,), -1, dtype=torch.long, device=node.device)
    local[node] = torch.arange(node.numel(), device=node.device)
    return node, local[torch.cat(picked)], local[torch.cat(dst)], torch.cat(edges)
