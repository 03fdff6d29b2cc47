import torch
import torch.distributed as dist
import torch.nn.functional as F

from tasks.zero1_optimizer_shard.reference import make_inputs  # noqa: F401  (same inputs)


def solution(X_local, y_local, W1, b1, W2, b2, exp_avg_part, exp_avg_sq_part, lr, beta1, beta2, eps, step):
    world_size = dist.get_world_size()
    rank = dist.get_rank()
    templates = [W1, b1, W2, b2]
    flat_params = torch.cat([t.reshape(-1) for t in templates])
    dist.broadcast(flat_params, src=0)
    sizes = [t.numel() for t in templates]
    params = [chunk.view_as(t) for chunk, t in zip(flat_params.split(sizes), templates)]

    with torch.enable_grad():
        leaves = [p.detach().requires_grad_(True) for p in params]
        hidden = F.relu(F.linear(X_local, leaves[0], leaves[1]))
        loss = F.mse_loss(F.linear(hidden, leaves[2], leaves[3]), y_local)
        grads = torch.autograd.grad(loss, leaves)

    with torch.no_grad():
        part = exp_avg_part.numel()
        flat_grad = torch.cat([g.reshape(-1) for g in grads])
        g = flat_grad.new_empty(part)
        dist.reduce_scatter_tensor(g, flat_grad, op=dist.ReduceOp.SUM)
        g.div_(world_size)
        w = flat_params[rank * part : (rank + 1) * part].clone()
        m = exp_avg_part.clone()
        v = exp_avg_sq_part.clone()

        m.mul_(beta1).add_(g, alpha=1.0 - beta1)
        v.mul_(beta2).addcmul_(g, g, value=1.0 - beta2)
        w.add_((m / (1.0 - beta1**step)).div((v / (1.0 - beta2**step)).sqrt().add(eps)).mul(-lr))

        gathered = torch.empty_like(flat_params)
        dist.all_gather_into_tensor(gathered, w)
        out_params = [chunk.view_as(t) for chunk, t in zip(gathered.split(sizes), templates)]
    return (*out_params, m, v)
