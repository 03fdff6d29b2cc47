import torch
import torch.distributed as dist
import torch.nn.functional as F

from tasks.fla_kimi_delta_attention_cp_tp.problem import grid
from tasks.ring_attention_tp.reference import tp_cp_groups

LOWER_BOUND = -5.0  # KDA's gate: log decay = LOWER_BOUND * sigmoid(...), in (-5, 0) per token
CHUNK = 16  # tokens per chunk: within one, the cumulative log decay stays above 16 * LOWER_BOUND = -80


def make_inputs(ctx):
    d = ctx.dims
    b, s, h, kd, vd = d["B"], d["S"], d["H"], d["K"], d["V"]
    tp, _ = grid(ctx.world_size)
    tp_rank = ctx.rank % tp
    if tp > 1 and dist.is_initialized():
        tp_group, cp_group = tp_cp_groups(ctx.world_size, tp, ctx.rank)
    else:
        tp_group, cp_group = None, dist.group.WORLD if dist.is_initialized() else None
    # Every rank its own tokens of its own heads: the ranks of a CP group hold consecutive chunks of
    # one sequence, those of a TP group different heads of the same chunk.
    q = ctx.randn(b, s, h, kd)
    k = ctx.randn(b, s, h, kd)
    v = ctx.randn(b, s, h, vd)
    g = ctx.randn(b, s, h, kd)
    beta = ctx.randn(b, s, h)
    # The gate's parameters belong to the heads: alike on the ranks of a CP group. Biases from -10
    # to 0 give every head channels that forget within a token and channels that remember for
    # thousands, so the state handed across CP ranks matters.
    a_log = ctx.rand(tp, h, shared=True, low=-0.5, high=0.5)[tp_rank].contiguous()
    dt_bias = ctx.rand(tp, h * kd, shared=True, low=-10.0, high=0.0)[tp_rank].contiguous()
    return (q, k, v, g, beta, a_log, dt_bias, cp_group, tp_group)


def chunk_delta_rule(q, k, v, beta, log_decay, state, chunk: int = CHUNK):
    """The gated delta rule over T tokens in chunks, fp32, heads first:
        S_t = (I - beta_t k_t k_t^T) diag(exp(log_decay_t)) S_{t-1} + beta_t k_t v_t^T,  o_t = S_t^T q_t
    q, k (N, T, K), v (N, T, Vw), beta (N, T), log_decay (N, T, K) (per channel, each >= -80/chunk)
    or (N, T, 1) (one per head, any size), state (N, K, Vw). Returns (outputs (N, T, Vw), the state
    after the last token). Within a chunk the recurrence is solved in closed form (a unit lower
    triangular system for the chunk's updates), across chunks it is carried one chunk at a time."""
    n, t, kd = k.shape
    pad = -t % chunk
    if pad:  # padded tokens change nothing: no key, no value, no decay
        q, k, v = (F.pad(x, (0, 0, 0, pad)) for x in (q, k, v))
        beta, log_decay = F.pad(beta, (0, pad)), F.pad(log_decay, (0, 0, 0, pad))
    c = chunk
    nc = (t + pad) // c
    q, k, v, log_decay = (x.reshape(n, nc, c, x.shape[-1]) for x in (q, k, v, log_decay))
    beta = beta.reshape(n, nc, c, 1)
    cum = log_decay.cumsum(dim=2)  # log of the decay from the chunk's start to each token
    last = cum[:, :, -1:]
    if cum.shape[-1] == 1:
        # One decay per head: the pairwise factors exp(cum_i - cum_j), j <= i, directly.
        lower = torch.ones(c, c, dtype=torch.bool, device=q.device).tril()
        pair = torch.where(lower, cum - cum.transpose(-1, -2), float("-inf")).exp()
        scores_kk = (k @ k.transpose(-1, -2)) * pair
        scores_qk = (q @ k.transpose(-1, -2)) * pair
        k_start, q_start = k * cum.exp(), q * cum.exp()
    else:
        # One decay per channel: exp(cum_i - cum_j) split as exp(cum_i) * exp(-cum_j), both in
        # fp32 range since every cum is above -80.
        k_start, q_start = k * cum.exp(), q * cum.exp()
        k_back = k * (-cum).exp()
        scores_kk = k_start @ k_back.transpose(-1, -2)
        scores_qk = q_start @ k_back.transpose(-1, -2)
    k_end = k * (last - cum).exp()  # each key decayed to the chunk's end
    system = torch.eye(c, device=q.device) + (beta * scores_kk).tril(-1)
    w = torch.linalg.solve_triangular(system, beta * k_start, upper=False, unitriangular=True)
    u = torch.linalg.solve_triangular(system, beta * v, upper=False, unitriangular=True)
    scores_qk = scores_qk.tril()
    decay_end = last.exp().transpose(-1, -2)  # (n, nc, K or 1, 1)
    out = torch.empty_like(v)
    for i in range(nc):
        update = u[:, i] - w[:, i] @ state
        out[:, i] = q_start[:, i] @ state + scores_qk[:, i] @ update
        state = decay_end[:, i] * state + k_end[:, i].transpose(-1, -2) @ update
    return out.reshape(n, nc * c, -1)[:, :t], state


def _heads_first(x: torch.Tensor) -> torch.Tensor:
    """(B, S, H, ...) -> (B*H, S, ...)."""
    b, s, h = x.shape[:3]
    return x.transpose(1, 2).reshape(b * h, s, *x.shape[3:])


@torch.no_grad()
def solution(q, k, v, g, beta, a_log, dt_bias, cp_group=None, tp_group=None):
    cp_group = cp_group or dist.group.WORLD
    cp, cp_rank = dist.get_world_size(cp_group), dist.get_rank(cp_group)
    b, s, h, kd = q.shape
    vd = v.shape[-1]

    qf = _heads_first(F.normalize(q.float(), dim=-1) * kd**-0.5)
    kf = _heads_first(F.normalize(k.float(), dim=-1))
    rate = a_log.float().exp().view(h, 1)
    log_decay = _heads_first(LOWER_BOUND * torch.sigmoid(rate * (g.float() + dt_bias.float().view(h, kd))))
    bf = _heads_first(beta.float().sigmoid())
    vf = _heads_first(v.float())

    if cp == 1:
        out, _ = chunk_delta_rule(qf, kf, vf, bf, log_decay, qf.new_zeros(b * h, kd, vd))
    else:
        # Context parallelism by state hand-over: run this chunk once from the symbolic initial
        # state [I | 0] with values [0 | v], which yields the chunk's transition M and its state
        # from zero h (S_end = M S_0 + h), and outputs o = P S_0 + o_0. All-gather (M, h) over CP,
        # fold the earlier ranks' into this rank's initial state S_0, then finish the outputs.
        start = torch.cat([torch.eye(kd, device=q.device).expand(b * h, kd, kd), qf.new_zeros(b * h, kd, vd)], dim=-1)
        widened = torch.cat([vf.new_zeros(b * h, s, kd), vf], dim=-1)
        partial, end = chunk_delta_rule(qf, kf, widened, bf, log_decay, start)
        ends = end.new_empty(cp * end.shape[0], *end.shape[1:])
        dist.all_gather_into_tensor(ends, end.contiguous(), group=cp_group)
        ends = ends.view(cp, *end.shape)
        state = qf.new_zeros(b * h, kd, vd)
        for j in range(cp_rank):
            state = ends[j, :, :, :kd] @ state + ends[j, :, :, kd:]
        out = partial[..., :kd] @ state + partial[..., kd:]

    out = out.reshape(b, h, s, vd).transpose(1, 2).to(q.dtype).contiguous()
    if tp_group is not None and dist.get_world_size(tp_group) > 1:
        # The TP ranks hold different heads of the same tokens; the layer's output sums them.
        dist.all_reduce(out, group=tp_group)
    return out
