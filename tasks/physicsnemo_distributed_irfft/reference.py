import torch
import torch.distributed as dist


def make_inputs(ctx):
    d = ctx.dims
    h, w = d["H"], d["W"]
    # The spectrum of one real field: every rank draws the same field and keeps its rows, so the
    # Hermitian symmetry that links rows k and H-k (held by different ranks) holds.
    field = ctx.randn(d["B"], d["C"], h, w, dtype=torch.float32, shared=True)
    spectrum = torch.fft.rfft2(field, s=(h, w), dim=(-2, -1), norm="ortho")
    rows = h // ctx.world_size
    x = spectrum[:, :, ctx.rank * rows : (ctx.rank + 1) * rows].contiguous()
    return x, (h, w), (-2, -1), "ortho", None


@torch.no_grad()
def solution(x: torch.Tensor, s, dim, norm: str = "ortho", group=None) -> torch.Tensor:
    """Inverse 2D real FFT of a half spectrum split by rows (dim[0]); the field comes back split by
    columns (dim[1])."""
    group = group or dist.group.WORLD
    world = dist.get_world_size(group)
    rank = dist.get_rank(group)
    rows_dim, cols_dim = int(dim[0]) % x.ndim, int(dim[1]) % x.ndim
    if s is None:
        n_rows, n_cols = x.shape[rows_dim], 2 * (x.shape[cols_dim] - 1)
    else:
        n_rows, n_cols = int(s[0]), int(s[1])
    half = x.shape[cols_dim]
    local_rows = x.shape[rows_dim]

    # Complete the columns axis from Hermitian symmetry, X[k, n-j] = conj(X[-k, j]). Row -k is on
    # another rank: gather every row, mirror the rows (k -> -k mod n_rows) and the columns.
    gathered = [torch.empty_like(x) for _ in range(world)]
    dist.all_gather(gathered, x.contiguous(), group=group)
    every_row = torch.cat(gathered, dim=rows_dim)
    mirrored = every_row.narrow(cols_dim, 1, n_cols - half).flip(cols_dim).conj()
    mirrored = mirrored.flip(rows_dim).roll(1, dims=rows_dim)
    mine = mirrored.narrow(rows_dim, rank * local_rows, local_rows)
    full = torch.cat([x, mine], dim=cols_dim)

    partial = torch.fft.ifft(full, n=n_cols, dim=cols_dim, norm=norm)
    # Transpose the split: column block j goes to rank j, which stacks the row slices in rank order.
    send = [block.contiguous() for block in partial.chunk(world, dim=cols_dim)]
    recv = [torch.empty_like(block) for block in send]
    dist.all_to_all(recv, send, group=group)
    columns = torch.cat(recv, dim=rows_dim)
    return torch.fft.ifft(columns, n=n_rows, dim=rows_dim, norm=norm).real.contiguous()
