import torch
import torch.distributed as dist

FP8_E4M3_MAX = 448.0


def make_inputs(ctx):
    shard = ctx.randn(ctx.dims["P"])
    # Past maxima around the size of the current one (about 4 for a normal shard).
    history = ctx.rand(16, low=1.0, high=6.0)
    return (shard, history)


@torch.no_grad()
def solution(flat_param_shard: torch.Tensor, amax_history: torch.Tensor):
    world_size = dist.get_world_size()
    current = flat_param_shard.abs().max().to(torch.float32)
    history = torch.roll(amax_history, shifts=-1, dims=0)
    history[-1] = current.to(history.dtype)

    scale = history.max().clamp(min=1e-12).to(torch.float32) / FP8_E4M3_MAX
    codes = (flat_param_shard.float() / scale).to(torch.float8_e4m3fn)
    round_trip = (codes.float() * scale).to(flat_param_shard.dtype)

    gathered = round_trip.new_empty(world_size * round_trip.numel())
    dist.all_gather_into_tensor(gathered, round_trip.contiguous())
    return gathered, history
