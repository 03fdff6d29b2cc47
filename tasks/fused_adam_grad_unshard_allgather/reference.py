import torch
import torch.distributed as dist

GRAD_SIZE = 1e-2
PARAM_SIZE = 2e-2


def make_inputs(ctx):
    p = ctx.dims["P"]

    def magnitude():
        return ctx.rand(p, dtype=torch.float32, low=0.5, high=2.0)

    grad = ctx.randn(p, scale=GRAD_SIZE)
    master = ctx.randn(p, scale=PARAM_SIZE)
    sign = ctx.randint(0, 2, p).to(torch.float32).mul(2).sub(1)
    exp_avg = (sign * magnitude() * GRAD_SIZE).to(ctx.dtype)
    exp_avg_sq = (magnitude() * GRAD_SIZE**2).to(ctx.dtype)
    lr = ctx.rand(1, shared=True, dtype=torch.float64, low=3e-3, high=1e-2).item()
    step = int(ctx.randint(1, 11, 1, shared=True).item())
    return (grad, master, exp_avg, exp_avg_sq, lr, 0.9, 0.999, 1e-8, step)


@torch.no_grad()
def solution(
    grad_shard, master_shard, exp_avg, exp_avg_sq, lr: float, beta1: float, beta2: float, eps: float, step: int
):
    world_size = dist.get_world_size()
    m = exp_avg.clone()
    v = exp_avg_sq.clone()
    w = master_shard.clone()
    g = grad_shard
    m.mul_(beta1).add_(g, alpha=1.0 - beta1)
    v.mul_(beta2).addcmul_(g, g, value=1.0 - beta2)
    w.add_((m / (1.0 - beta1**step)).div((v / (1.0 - beta2**step)).sqrt().add(eps)).mul(-lr))
    gathered = w.new_empty(world_size * w.numel())
    dist.all_gather_into_tensor(gathered, w.contiguous())
    return gathered
