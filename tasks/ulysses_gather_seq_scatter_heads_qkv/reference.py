import torch
import torch.distributed as dist


def make_inputs(ctx):
    d = ctx.dims
    qkv = ctx.randn(d["B"], d["T"], 3 * d["NH"] * d["D"])
    unpadded = ctx.world_size * d["T"] - d["P"] if d["P"] else None
    return (qkv, 1, None, unpadded, True)


@torch.no_grad()
def solution(
    qkv_tensor: torch.Tensor,
    seq_dim: int,
    group=None,
    unpadded_dim_size: int | None = None,
    restore_shape: bool = True,
) -> torch.Tensor:
    group = group or dist.group.WORLD
    world_size = dist.get_world_size(group)
    orig_shape = list(qkv_tensor.shape)
    proj = orig_shape[-1]
    # (..., 3*NH*D) -> (..., 3, NH*D): scattering the last dim hands every rank the same head
    # group of q, k and v.
    x = qkv_tensor.reshape(orig_shape[:-1] + [3, proj // 3])
    send = torch.stack(torch.tensor_split(x, world_size, dim=x.dim() - 1)).contiguous()
    recv = torch.empty_like(send)
    dist.all_to_all_single(recv, send, group=group)
    x = torch.cat(recv.unbind(0), dim=seq_dim).contiguous()
    if restore_shape:
        out_shape = list(orig_shape)
        out_shape[seq_dim] *= world_size
        out_shape[-1] = proj // world_size
        x = x.view(out_shape)
    if unpadded_dim_size and unpadded_dim_size % world_size != 0:
        x = x.narrow(seq_dim, 0, unpadded_dim_size)
    return x
