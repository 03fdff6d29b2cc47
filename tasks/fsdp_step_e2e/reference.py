import math

import torch
import torch.distributed as dist
import torch.nn.functional as F

from tasks.ddp.reference import GRAD_SIZE, adam_moments


def make_inputs(ctx):
    d = ctx.dims
    n, d_in, hid, d_out = d["n"], d["d_in"], d["hid"], d["d_out"]
    w = ctx.world_size
    shapes = ((hid, d_in), (hid,), (d_out, hid), (d_out,))
    x = ctx.randn(n, d_in)
    # As in the DDP problems: targets scaled so that an averaged gradient entry is about GRAD_SIZE.
    y = ctx.randn(n, d_out, scale=max(1.0, GRAD_SIZE * (n * w) ** 0.5 * d_out))
    flat = torch.cat([
        ctx.randn(hid * d_in, shared=True, scale=d_in**-0.5),
        ctx.randn(hid, shared=True, scale=0.1),
        ctx.randn(d_out * hid, shared=True, scale=hid**-0.5),
        ctx.randn(d_out, shared=True, scale=0.1),
    ])
    if flat.numel() % w:
        raise ValueError(f"{flat.numel()} parameters do not split over {w} ranks")
    part = flat.numel() // w
    shard = flat[ctx.rank * part:(ctx.rank + 1) * part].clone()
    (exp_avg,), (exp_avg_sq,) = adam_moments(ctx, [(part,)])
    lr = ctx.rand(1, shared=True, dtype=torch.float64, low=3e-3, high=1e-2).item()
    weight_decay = ctx.rand(1, shared=True, dtype=torch.float64, low=0.01, high=0.1).item()
    step = int(ctx.randint(1, 11, 1, shared=True).item())
    return (x, y, shard, shapes, exp_avg, exp_avg_sq, lr, 0.9, 0.999, 1e-8, weight_decay, step)


def solution(X_local, y_local, flat_param_shard, param_shapes, exp_avg_shard, exp_avg_sq_shard,
             lr, beta1, beta2, eps, weight_decay, step):
    world = dist.get_world_size()
    part = flat_param_shard.numel()
    full = flat_param_shard.new_empty(world * part)
    dist.all_gather_into_tensor(full, flat_param_shard)
    sizes = [math.prod(s) for s in param_shapes]
    params = [chunk.view(s) for chunk, s in zip(full.split(sizes), param_shapes)]

    with torch.enable_grad():
        leaves = [p.detach().requires_grad_(True) for p in params]
        hidden = F.relu(F.linear(X_local, leaves[0], leaves[1]))
        loss = F.mse_loss(F.linear(hidden, leaves[2], leaves[3]), y_local)
        grads = torch.autograd.grad(loss, leaves)

    with torch.no_grad():
        flat_grad = torch.cat([g.reshape(-1) for g in grads])
        g = flat_grad.new_empty(part)
        dist.reduce_scatter_tensor(g, flat_grad, op=dist.ReduceOp.SUM)
        g.div_(world)
        m = exp_avg_shard.clone().mul_(beta1).add_(g, alpha=1.0 - beta1)
        v = exp_avg_sq_shard.clone().mul_(beta2).addcmul_(g, g, value=1.0 - beta2)
        update = (m / (1.0 - beta1**step)).div((v / (1.0 - beta2**step)).sqrt().add(eps))
        theta = flat_param_shard.clone()
        theta.add_(update, alpha=-lr).add_(flat_param_shard, alpha=-lr * weight_decay)
    return theta, m, v
