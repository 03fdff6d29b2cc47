import torch
import torch.distributed as dist

# H is small (as gradients of one prediction are): H^T P H is about N * H_SCALE^2, below the
# lambda term of each block, so the gain a stays near 1 / (W * NB).
H_SCALE = 0.01
# Off-diagonal covariance of a filter in progress: P = I + sym(A) with A of this size times N^-1/2
# (eigenvalues within 1 +- 0.15, positive definite).
P_OFFDIAG = 0.1


def make_inputs(ctx):
    nb, n = ctx.dims["NB"], ctx.dims["N"]
    eye = torch.eye(n, dtype=torch.float64, device=ctx.device)
    H, weights, P = [], [], []
    for _ in range(nb):
        H.append(ctx.randn(n, 1, scale=H_SCALE))
        weights.append(ctx.randn(n, 1))
        a = ctx.randn(n, n, scale=P_OFFDIAG * n**-0.5)
        P.append(eye + (a + a.T) / 2)
    error = ctx.randn(1).reshape(())
    lam = ctx.rand(1, shared=True, low=0.95, high=0.999).item()
    nue = ctx.rand(1, shared=True, low=0.99, high=0.9999).item()
    return (H, error, weights, P, lam, nue)


@torch.no_grad()
def solution(H, error, weights, P, kalman_lambda, kalman_nue=0.9987):
    world = dist.get_world_size()
    lam = torch.tensor(kalman_lambda, dtype=weights[0].dtype, device=weights[0].device)
    total = torch.zeros((1, 1), dtype=weights[0].dtype, device=weights[0].device)
    for h, p in zip(H, P):
        total += lam + h.T @ p @ h
    dist.all_reduce(total)
    a = 1 / total

    new_weights, new_P = [], []
    for h, w, p in zip(H, weights, P):
        k = p @ h
        new_weights.append(w + a * error * k)
        new_P.append((p - a * (k @ k.T)) / lam)

    flat = torch.cat([w.reshape(-1) for w in new_weights])
    gathered = [torch.empty_like(flat) for _ in range(world)]
    dist.all_gather(gathered, flat)
    sizes = [w.numel() for w in new_weights]  # every rank holds the same blocks' sizes
    every = [piece.reshape(-1, 1) for g in gathered for piece in g.split(sizes)]
    lam_next = kalman_nue * lam + 1 - kalman_nue
    return every, new_P, lam_next
