import torch
import torch.distributed as dist


def make_inputs(ctx):
    m, n = ctx.dims["M"], ctx.dims["N"]
    return ctx.randn(m, n), ctx.randn(n), 1e-5


def solution(local_hidden_states: torch.Tensor, local_weight: torch.Tensor, variance_epsilon: float) -> torch.Tensor:
    input_dtype = local_hidden_states.dtype
    x = local_hidden_states.to(torch.float32)
    sum_squares = x.pow(2).sum(dim=-1, keepdim=True)
    dist.all_reduce(sum_squares, op=dist.ReduceOp.SUM)
    variance = sum_squares / (x.shape[-1] * dist.get_world_size())
    normalized = x * torch.rsqrt(variance + variance_epsilon)
    return local_weight * normalized.to(input_dtype)
