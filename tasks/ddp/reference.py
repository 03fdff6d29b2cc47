import torch
import torch.distributed as dist
import torch.nn.functional as F

# Typical size of a gradient entry. Targets are scaled so that the MSE gradient has this size at
# every shape: tolerances on the optimizer outputs can then be absolute.
GRAD_SIZE = 1e-2


def mlp_state(ctx):
    """Inputs shared by the data-parallel optimizer problems: batch, targets, parameters (rank 0's
    are the model's) and the Adam hyperparameters."""
    d = ctx.dims
    n, d_in, hid, d_out = d["n"], d["d_in"], d["hid"], d["d_out"]
    x = ctx.randn(n, d_in)
    # d(mean squared error)/d(output) is 2*(out - y)/(n*d_out); averaged over the W*n rows of all
    # ranks, a weight gradient entry is about |y| / (sqrt(W*n) * d_out).
    y = ctx.randn(n, d_out, scale=max(1.0, GRAD_SIZE * (n * ctx.world_size) ** 0.5 * d_out))
    params = [
        ctx.randn(hid, d_in, scale=d_in**-0.5),
        ctx.randn(hid, scale=0.1),
        ctx.randn(d_out, hid, scale=hid**-0.5),
        ctx.randn(d_out, scale=0.1),
    ]
    lr = ctx.rand(1, shared=True, dtype=torch.float64, low=3e-3, high=1e-2).item()
    step = int(ctx.randint(1, 11, 1, shared=True).item())
    return x, y, params, (lr, 0.9, 0.999, 1e-8, step)


def adam_moments(ctx, shapes):
    """Adam state of a run in progress: first moments of either sign and second moments, both of
    the size of past gradients and bounded away from zero."""

    def magnitude(shape):
        return ctx.rand(*shape, dtype=torch.float32, low=0.5, high=2.0)

    exp_avg = []
    for s in shapes:
        sign = ctx.randint(0, 2, *s).to(torch.float32).mul(2).sub(1)
        exp_avg.append((sign * magnitude(s) * GRAD_SIZE).to(ctx.dtype))
    exp_avg_sq = [(magnitude(s) * GRAD_SIZE**2).to(ctx.dtype) for s in shapes]
    return exp_avg, exp_avg_sq


def make_inputs(ctx):
    x, y, params, hyper = mlp_state(ctx)
    exp_avg, exp_avg_sq = adam_moments(ctx, [tuple(p.shape) for p in params])
    return (x, y, *params, *exp_avg, *exp_avg_sq, *hyper)


def _broadcast_from_rank0(tensors: list[torch.Tensor]) -> list[torch.Tensor]:
    """One flat broadcast; returns fresh tensors (the inputs stay untouched)."""
    flat = torch.cat([t.reshape(-1) for t in tensors])
    dist.broadcast(flat, src=0)
    return [chunk.view_as(t) for chunk, t in zip(flat.split([t.numel() for t in tensors]), tensors)]


def solution(
    X_local, y_local, W1, b1, W2, b2,
    exp_avg_W1, exp_avg_b1, exp_avg_W2, exp_avg_b2,
    exp_avg_sq_W1, exp_avg_sq_b1, exp_avg_sq_W2, exp_avg_sq_b2,
    lr: float, beta1: float, beta2: float, eps: float, step: int,
):  # fmt: skip
    world_size = dist.get_world_size()
    params = _broadcast_from_rank0([W1, b1, W2, b2])
    exp_avg = _broadcast_from_rank0([exp_avg_W1, exp_avg_b1, exp_avg_W2, exp_avg_b2])
    exp_avg_sq = _broadcast_from_rank0([exp_avg_sq_W1, exp_avg_sq_b1, exp_avg_sq_W2, exp_avg_sq_b2])

    with torch.enable_grad():
        leaves = [p.detach().requires_grad_(True) for p in params]
        hidden = F.relu(F.linear(X_local, leaves[0], leaves[1]))
        loss = F.mse_loss(F.linear(hidden, leaves[2], leaves[3]), y_local)
        grads = torch.autograd.grad(loss, leaves)

    with torch.no_grad():
        flat_grad = torch.cat([g.reshape(-1) for g in grads])
        dist.all_reduce(flat_grad, op=dist.ReduceOp.SUM)
        flat_grad.div_(world_size)
        grads = [chunk.view_as(g) for chunk, g in zip(flat_grad.split([g.numel() for g in grads]), grads)]

        bias1 = 1.0 - beta1**step
        bias2 = 1.0 - beta2**step
        for p, m, v, g in zip(params, exp_avg, exp_avg_sq, grads):
            m.mul_(beta1).add_(g, alpha=1.0 - beta1)
            v.mul_(beta2).addcmul_(g, g, value=1.0 - beta2)
            p.add_((m / bias1).div((v / bias2).sqrt().add(eps)).mul(-lr))
    return (*params, *exp_avg, *exp_avg_sq)
