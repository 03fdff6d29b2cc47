import torch
import torch.distributed as dist


def make_inputs(ctx):
    b, p = ctx.dims["B"], ctx.dims["P"]
    # Masked-patch counts differ from rank to rank (iBOT masks a random share of each image).
    rows = int(ctx.randint(b - b // 2, b + b // 2 + 1, 1).item())
    # Logits of std 0.1 over a temperature of 0.07: exponentials spread over about e^+-6.
    teacher_output = ctx.randn(rows, p, dtype=torch.float32, scale=0.1)
    n_masked_patches = torch.tensor([rows], dtype=torch.int64, device=ctx.device)
    return (teacher_output, 0.07, n_masked_patches, 3, None)


@torch.no_grad()
def solution(teacher_output, teacher_temp, n_masked_patches_tensor, n_iterations=3, group=None):
    group = group or dist.group.WORLD
    # q: (prototypes, samples); rows are prototypes, columns this rank's samples.
    q = torch.exp(teacher_output.float() / teacher_temp).t()
    prototypes = q.shape[0]
    samples = n_masked_patches_tensor.to(device=q.device, dtype=q.dtype).clone()
    dist.all_reduce(samples, group=group)
    mass = q.sum()
    dist.all_reduce(mass, group=group)
    q = q / mass
    for _ in range(n_iterations):
        # Each prototype gets 1/prototypes of the mass, summed over every rank's samples...
        per_prototype = q.sum(dim=1, keepdim=True)
        dist.all_reduce(per_prototype, group=group)
        q = q / per_prototype / prototypes
        # ...and each sample 1/samples of it (a sample's column lives on one rank).
        q = q / q.sum(dim=0, keepdim=True) / samples
    return (q * samples).t().contiguous()
