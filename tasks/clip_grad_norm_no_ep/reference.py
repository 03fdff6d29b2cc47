import torch
import torch.distributed as dist

GRAD_SCALE = 1e-2


def make_inputs(ctx):
    d = ctx.dims
    shapes = [(d["M"], d["N"]) if i % 2 == 0 else (d["N"], d["M"]) for i in range(d["L"])]
    grads = [ctx.randn(*shape, scale=GRAD_SCALE) for shape in shapes]
    # Between 0.25 and 0.75 of the expected global norm: clipping always triggers.
    expected_norm = GRAD_SCALE * (ctx.world_size * d["L"] * d["M"] * d["N"]) ** 0.5
    max_norm = expected_norm * ctx.rand(1, shared=True, dtype=torch.float64, low=0.25, high=0.75).item()
    return (grads, max_norm, 2.0, dist.group.WORLD)


@torch.no_grad()
def solution(
    grad_tensors: list[torch.Tensor], max_norm: float, norm_type: float = 2.0, fsdp_group=None
) -> torch.Tensor:
    p = float(norm_type)
    grads = [g for g in grad_tensors if g is not None]
    total = torch.zeros((), dtype=torch.float32, device=grads[0].device)
    for g in grads:
        total = total + torch.linalg.vector_norm(g.float(), ord=p) ** p
    if fsdp_group is not None:
        dist.all_reduce(total, op=dist.ReduceOp.SUM, group=fsdp_group)
    total_norm = total ** (1.0 / p)
    if total_norm > max_norm:
        coef = max_norm / total_norm
        for g in grads:
            g.mul_(coef)
    return total_norm
