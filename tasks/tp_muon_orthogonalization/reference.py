import torch
import torch.distributed as dist

# Muon's quintic Newton-Schulz coefficients (a, b, c), one triple per step: X <- a X + (b G + c G^2) X
# with G = X X^T.
QUINTIC = (
    (4.0848, -6.8946, 2.9270),
    (3.9505, -6.3029, 2.6377),
    (3.7418, -5.5913, 2.3037),
    (2.8769, -3.1427, 1.2046),
    (2.8366, -3.0525, 1.2012),
)


def make_inputs(ctx):
    d = ctx.dims
    # A gradient-like matrix (R, N), column-sharded: this rank's N/W columns.
    x = ctx.randn(d["R"], d["N"] // ctx.world_size)
    return (x, 5, "quintic", 1, None)


@torch.no_grad()
def solution(x, steps=5, coefficient_type="quintic", partition_dim=1, group=None):
    group = group or dist.group.WORLD
    if coefficient_type != "quintic" or steps % len(QUINTIC):
        raise ValueError("this problem runs whole rounds of the quintic coefficients")
    # Rows of the working matrix are shared by every rank, its columns are sharded: a Gram matrix
    # X X^T is a sum over ranks of their columns' products.
    work = (x if partition_dim == 1 else x.mT).float()
    square = work.square().sum()
    dist.all_reduce(square, group=group)
    work = work / square.sqrt().clamp_min(1e-7)
    for step in range(steps):
        a, b, c = QUINTIC[step % len(QUINTIC)]
        gram = work @ work.mT
        dist.all_reduce(gram, group=group)
        poly = b * gram + c * (gram @ gram)
        work = a * work + poly @ work
    out = work if partition_dim == 1 else work.mT
    return out.to(x.dtype).contiguous()
