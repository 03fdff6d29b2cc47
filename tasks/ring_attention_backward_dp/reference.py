import torch
import torch.distributed as dist

from tasks.ring_attention.reference import _block_attention, query_chunks  # queries in chunks: bounded memory

# Process groups per (default group, DP size); new_group is collective, so build them once.
_GROUPS: dict[tuple[int, int], tuple] = {}
# Scores q.k/sqrt(D) of standard deviation 2, as in the forward problems: attention on a few dozen
# keys; the gradients are then of order 1.
Q_SCALE = 2.0


def cp_dp_groups(world_size: int, dp_size: int, rank: int):
    """(cp_group, dp_group): CP groups are runs of world/dp_size consecutive ranks (one data-parallel
    replica), DP groups take the same CP position in every replica. Every rank creates every group."""
    key = (id(dist.group.WORLD), dp_size)
    if key not in _GROUPS:
        cp_size = world_size // dp_size
        cp_group = dp_group = None
        for start in range(0, world_size, cp_size):
            ranks = list(range(start, start + cp_size))
            group = dist.new_group(ranks)
            if rank in ranks:
                cp_group = group
        for offset in range(cp_size):
            ranks = list(range(offset, world_size, cp_size))
            group = dist.new_group(ranks)
            if rank in ranks:
                dp_group = group
        _GROUPS[key] = (cp_group, dp_group)
    return _GROUPS[key]


def make_inputs(ctx):
    d = ctx.dims
    dp = min(2, ctx.world_size)
    cp = ctx.world_size // dp
    dp_rank, cp_rank = ctx.rank // cp, ctx.rank % cp
    cp_group, dp_group = cp_dp_groups(ctx.world_size, dp, ctx.rank)
    local = d["T"] // cp
    shape = (d["B"], local, d["NH"], d["D"])
    # Every replica's sequence is drawn alike on every rank, so that each rank can give its queries
    # the forward output and log-sum-exp of attention over its whole replica's sequence.
    q_all = ctx.randn(dp, cp, *shape, shared=True, scale=Q_SCALE)[dp_rank]
    k_all = ctx.randn(dp, cp, *shape, shared=True)[dp_rank]
    v_all = ctx.randn(dp, cp, *shape, shared=True)[dp_rank]
    dout = ctx.randn(dp, cp, *shape, shared=True)[dp_rank, cp_rank].contiguous()
    q = q_all[cp_rank].contiguous()
    keys = k_all.transpose(0, 1).reshape(d["B"], cp * local, d["NH"], d["D"])
    values = v_all.transpose(0, 1).reshape(d["B"], cp * local, d["NH"], d["D"])
    out, lse = _block_attention(q, keys, values, d["D"] ** -0.5, diagonal=False)
    out, lse = out.transpose(1, 2).to(q.dtype).contiguous(), lse.squeeze(-1)
    k, v = k_all[cp_rank].contiguous(), v_all[cp_rank].contiguous()
    return (dout, q, k, v, out, lse, None, False, cp_group, dp_group)


def _block_gradients(dout, q, k, v, lse, row_dot, scale: float, diagonal: bool):
    """The gradients of attention through one key/value block, in fp32, heads-first (B, NH, S, D):
    dq's part from this block, and dk, dv of the block's keys and values from the local queries.
    Queries go in chunks of rows, as in the forward pass, so memory stays bounded."""
    dqs, dk, dv = [], 0.0, 0.0
    for rows, future in query_chunks(q, k.shape[-2], diagonal):
        scores = torch.matmul(q[..., rows, :], k.transpose(-2, -1)) * scale
        if future is not None:
            scores = scores.masked_fill(future, float("-inf"))
        probs = torch.exp(scores - lse[..., rows, :])
        dscores = probs * (torch.matmul(dout[..., rows, :], v.transpose(-2, -1)) - row_dot[..., rows, :])
        dqs.append(torch.matmul(dscores, k) * scale)
        dk = dk + torch.matmul(dscores.transpose(-2, -1), q[..., rows, :]) * scale
        dv = dv + torch.matmul(probs.transpose(-2, -1), dout[..., rows, :])
    return torch.cat(dqs, dim=-2), dk, dv


@torch.no_grad()
def solution(dout, q, k, v, out, softmax_lse, softmax_scale=None, causal=False, cp_group=None, dp_group=None):
    cp_group = cp_group or dist.group.WORLD
    members = dist.get_process_group_ranks(cp_group)
    rank, world = dist.get_rank(cp_group), len(members)
    scale = float(softmax_scale) if softmax_scale is not None else q.shape[-1] ** -0.5
    dtype = q.dtype
    qh, douth, outh = (t.transpose(1, 2).float() for t in (q, dout, out))
    lse = softmax_lse.float().unsqueeze(-1)
    row_dot = (douth * outh).sum(dim=-1, keepdim=True)

    # Each key/value block travels around the CP ring with the fp32 gradients of its keys and
    # values accumulated so far: at step s this rank holds rank r-s's block, adds what its own
    # queries contribute and passes it on; one last hop brings every block's gradients home.
    block = torch.cat([k.transpose(1, 2).float(), v.transpose(1, 2).float()], dim=-1)
    grads = torch.zeros_like(block)
    dq = torch.zeros_like(qh)
    head_dim = q.shape[-1]
    for step in range(world):
        if not causal or step <= rank:
            kb, vb = block[..., :head_dim], block[..., head_dim:]
            bq, bk, bv = _block_gradients(douth, qh, kb, vb, lse, row_dot, scale, causal and step == 0)
            dq += bq
            grads = grads + torch.cat([bk, bv], dim=-1)
        travelling = torch.cat([block, grads], dim=-1) if step + 1 < world else grads
        if world > 1:
            incoming = torch.empty_like(travelling)
            for request in dist.batch_isend_irecv([
                dist.P2POp(dist.isend, travelling.contiguous(), members[(rank + 1) % world], cp_group),
                dist.P2POp(dist.irecv, incoming, members[(rank - 1) % world], cp_group),
            ]):
                request.wait()
            travelling = incoming
        if step + 1 < world:
            block, grads = travelling[..., : 2 * head_dim], travelling[..., 2 * head_dim :]
        else:
            grads = travelling
    dk, dv = grads[..., :head_dim], grads[..., head_dim:]

    # Data parallelism: the gradients are averaged over the replicas (in fp32, rounded once).
    result = torch.stack([dq, dk, dv])
    if dp_group is not None and dist.get_world_size(dp_group) > 1:
        dist.all_reduce(result, group=dp_group)
        result /= dist.get_world_size(dp_group)
    dq, dk, dv = (g.transpose(1, 2).contiguous().to(dtype) for g in result)
    return dq, dk, dv
