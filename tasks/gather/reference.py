import torch
import torch.distributed as dist


def make_inputs(ctx):
    dst = int(ctx.randint(0, ctx.world_size, 1, shared=True))
    return ctx.randn(ctx.dims["M"], ctx.dims["N"]), dst


@torch.no_grad()
def solution(tensor: torch.Tensor, dst: int = 0) -> torch.Tensor:
    if dist.get_rank() != dst:
        dist.gather(tensor.contiguous(), gather_list=None, dst=dst)
        return tensor
    world_size = dist.get_world_size()
    parts = [torch.empty_like(tensor) for _ in range(world_size)]
    dist.gather(tensor.contiguous(), gather_list=parts, dst=dst)
    return torch.stack(parts, dim=0)
