import torch
import torch.distributed as dist

EPS2D = 0.3
NEAR_PLANE = 0.01
FAR_PLANE = 1e10
# A 2D footprint's radius in pixels is ceil(RADIUS_SIGMAS * its standard deviation) per axis.
RADIUS_SIGMAS = 3.33
# The camera frustum's half-width slack, in units of tan(fov/2), before the Jacobian clamps.
FRUSTUM_SLACK = 0.3
COLOR_CHANNELS = 3

# The draws keep every discrete decision away from its threshold, for every camera of every rank:
# each footprint's RADIUS_SIGMAS * sigma at least RADIUS_MARGIN of its own value from an integer
# (its ceil, the radius, is then the same in any arithmetic down to bf16, whose whole-pipeline
# error was measured at 3.1% at most), and every bounding-box edge at least EDGE_MARGIN of the
# image's larger side from the image border (bf16 moved a projected mean by 0.9% of that side at most).
RADIUS_MARGIN = 0.05
EDGE_MARGIN = 0.02
# Projected footprints have standard deviations of 0.1 to 1 pixel per axis (for a gaussian at the
# middle depth, before rotation), so radii are 2 to about 6 pixels.
SIGMA_PX = (0.1, 1.0)
DEPTH = (2.0, 4.0)
# Three quarters of the gaussians lie within CENTRE of the nominal half field of view across (the
# cameras' turns and moves take a few of them off some screens), the others between OFF_SCREEN[0]
# and OFF_SCREEN[1] of it along one axis (off every screen).
ON_SCREEN = 0.75
CENTRE = 1.0
OFF_SCREEN = (1.4, 1.8)


def quat_to_rotation(quats: torch.Tensor) -> torch.Tensor:
    """(..., 4) quaternions (w, x, y, z), normalized here, to (..., 3, 3) rotation matrices."""
    w, x, y, z = (quats / quats.norm(dim=-1, keepdim=True)).unbind(-1)
    rows = (
        (1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)),
        (2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)),
        (2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)),
    )
    return torch.stack([torch.stack(r, dim=-1) for r in rows], dim=-2)


def world_covariances(quats: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    """(N, 3, 3) covariances R diag(s^2) R^T."""
    rs = quat_to_rotation(quats) * scales.unsqueeze(-2)
    return rs @ rs.transpose(-1, -2)


def project(
    means,
    covars,
    viewmats,
    Ks,
    width: int,
    height: int,
    eps2d: float = EPS2D,
    near: float = NEAR_PLANE,
    far: float = FAR_PLANE,
) -> dict:
    """Every gaussian (N) seen from every camera (C), in the arithmetic of the inputs' dtype:
    (C, N, ...) radius values RADIUS_SIGMAS * sigma (unrounded), radii (their ceil, 0 where culled),
    means2d, depths, conics (the inverse of the 2D covariance plus eps2d, upper triangle) and the
    visibility mask."""
    rot, trans = viewmats[:, None, :3, :3], viewmats[:, None, :3, 3]
    cam = (rot @ means[None, :, :, None]).squeeze(-1) + trans  # (C, N, 3)
    cov = rot @ covars[None] @ rot.transpose(-1, -2)  # (C, N, 3, 3)
    tx, ty, tz = cam.unbind(-1)
    k = Ks[:, None]
    fx, fy, cx, cy = k[..., 0, 0], k[..., 1, 1], k[..., 0, 2], k[..., 1, 2]
    # Beyond the frustum (plus slack) the projection is linearized at the frustum's edge.
    slack_x, slack_y = FRUSTUM_SLACK * 0.5 * width / fx, FRUSTUM_SLACK * 0.5 * height / fy
    x = tz * torch.minimum(torch.maximum(tx / tz, -(cx / fx + slack_x)), (width - cx) / fx + slack_x)
    y = tz * torch.minimum(torch.maximum(ty / tz, -(cy / fy + slack_y)), (height - cy) / fy + slack_y)
    zero = torch.zeros_like(tz)
    jac = torch.stack([fx / tz, zero, -fx * x / (tz * tz), zero, fy / tz, -fy * y / (tz * tz)], dim=-1)
    jac = jac.reshape(*tz.shape, 2, 3)
    cov2d = jac @ cov @ jac.transpose(-1, -2)
    a = cov2d[..., 0, 0] + eps2d
    c = cov2d[..., 1, 1] + eps2d
    b = 0.5 * (cov2d[..., 0, 1] + cov2d[..., 1, 0])
    det = (a * c - b * b).clamp_min(1e-10)
    conics = torch.stack([c / det, -b / det, a / det], dim=-1)
    means2d = (k[..., :2, :] @ cam[..., None]).squeeze(-1) / tz[..., None]
    values = RADIUS_SIGMAS * torch.stack([a.sqrt(), c.sqrt()], dim=-1)
    radii = torch.ceil(values)
    edges = torch.stack(
        [
            means2d[..., 0] + radii[..., 0],
            width - (means2d[..., 0] - radii[..., 0]),
            means2d[..., 1] + radii[..., 1],
            height - (means2d[..., 1] - radii[..., 1]),
        ],
        dim=-1,
    )
    visible = (tz > near) & (tz < far) & (edges > 0).all(dim=-1)
    return {
        "values": values,
        "radii": radii * visible[..., None],
        "means2d": means2d,
        "depths": tz,
        "conics": conics,
        "visible": visible,
        "edges": edges,
    }


# ---------------------------------------------------------------------------------------------
# The draws.
# ---------------------------------------------------------------------------------------------


def _rotations(axis_angle: torch.Tensor) -> torch.Tensor:
    """(M, 3) axis-angle vectors to (M, 3, 3) rotation matrices (Rodrigues), float64."""
    angle = axis_angle.norm(dim=-1).clamp_min(1e-12)[:, None, None]
    kx, ky, kz = (axis_angle / angle[:, :, 0]).unbind(-1)
    zero = torch.zeros_like(kx)
    skew = torch.stack([zero, -kz, ky, kz, zero, -kx, -ky, kx, zero], dim=-1).reshape(-1, 3, 3)
    eye = torch.eye(3, dtype=axis_angle.dtype, device=axis_angle.device)
    return eye + angle.sin() * skew + (1 - angle.cos()) * skew @ skew


def draw_cameras(ctx, count: int, width: int, height: int) -> tuple[torch.Tensor, torch.Tensor]:
    """`count` pinhole cameras (the same on every rank): near the origin looking down +z, turned by
    up to 0.05 rad, moved by up to 0.1 sideways and 0.2 in depth, focal 0.8 * min(W, H) within 5%,
    principal point within 4 px of the image centre."""
    f64 = torch.float64
    turn = ctx.rand(count, 3, shared=True, dtype=f64, low=-0.05, high=0.05)
    move = ctx.rand(count, 3, shared=True, dtype=f64, low=-1.0, high=1.0) * torch.tensor(
        [0.1, 0.1, 0.2], dtype=f64, device=ctx.device
    )
    viewmats = torch.eye(4, dtype=f64, device=ctx.device).repeat(count, 1, 1)
    viewmats[:, :3, :3] = _rotations(turn)
    viewmats[:, :3, 3] = move
    focal = 0.8 * min(width, height) * ctx.rand(count, 2, shared=True, dtype=f64, low=0.95, high=1.05)
    centre = ctx.rand(count, 2, shared=True, dtype=f64, low=-4.0, high=4.0)
    Ks = torch.eye(3, dtype=f64, device=ctx.device).repeat(count, 1, 1)
    Ks[:, 0, 0], Ks[:, 1, 1] = focal[:, 0], focal[:, 1]
    Ks[:, 0, 2], Ks[:, 1, 2] = width / 2 + centre[:, 0], height / 2 + centre[:, 1]
    return viewmats.to(ctx.dtype), Ks.to(ctx.dtype)


def _candidates(ctx, count: int, width: int, height: int, off_screen: bool) -> tuple[torch.Tensor, ...]:
    """`count` gaussians in front of the cameras, their means within CENTRE of the nominal half
    field of view across, or (off_screen) between OFF_SCREEN[0] and OFF_SCREEN[1] of it on one axis."""
    f64 = torch.float64
    focal = 0.8 * min(width, height)
    depth = ctx.rand(count, dtype=f64, low=DEPTH[0], high=DEPTH[1])
    if off_screen:
        across = ctx.rand(count, 2, dtype=f64, low=-OFF_SCREEN[1], high=OFF_SCREEN[1])
        far = ctx.rand(count, dtype=f64, low=OFF_SCREEN[0], high=OFF_SCREEN[1])
        axis = ctx.randint(0, 2, count)
        picked = across.gather(1, axis[:, None]).squeeze(1)
        across.scatter_(1, axis[:, None], (far * torch.where(picked < 0, -1.0, 1.0))[:, None])
    else:
        across = ctx.rand(count, 2, dtype=f64, low=-CENTRE, high=CENTRE)
    half = torch.tensor([width / 2, height / 2], dtype=f64, device=ctx.device) / focal
    means = torch.cat([across * half * depth[:, None], depth[:, None]], dim=1)
    quats = ctx.randn(count, 4, dtype=f64)
    middle = sum(DEPTH) / 2
    scales = ctx.rand(count, 3, dtype=f64, low=SIGMA_PX[0], high=SIGMA_PX[1]) * middle / focal
    return means.to(ctx.dtype), quats.to(ctx.dtype), scales.to(ctx.dtype)


def unambiguous(means, quats, scales, viewmats, Ks, width: int, height: int) -> torch.Tensor:
    """(N,) whether every decision about a gaussian, for every camera, is clear of its threshold
    (computed in float64 from the inputs as drawn)."""
    f64 = torch.float64
    covars = world_covariances(quats.to(f64), scales.to(f64))
    ok = torch.ones(means.shape[0], dtype=torch.bool, device=means.device)
    for cam in range(viewmats.shape[0]):  # one camera at a time: the candidates are many
        p = project(means.to(f64), covars, viewmats[cam : cam + 1].to(f64), Ks[cam : cam + 1].to(f64), width, height)
        values, edges, margin = p["values"][0], p["edges"][0], EDGE_MARGIN * max(width, height)
        # Seen: both radii unambiguous and the box clearly inside the image on every side.
        seen = ((values - values.round()).abs() >= RADIUS_MARGIN * values).all(dim=-1) & (edges >= margin).all(dim=-1)
        # Culled: some side clearly outside even with the largest radius any such arithmetic gives.
        wider = (torch.ceil(values * (1 + RADIUS_MARGIN)) - values.ceil()).repeat_interleave(2, dim=-1)
        culled = (edges + wider <= -margin).any(dim=-1)
        ok &= (seen | culled) & (p["depths"][0] > DEPTH[0] / 2)
    return ok


def _draw_clear(ctx, count: int, viewmats, Ks, width: int, height: int, off_screen: bool) -> list[torch.Tensor]:
    kept: list[tuple[torch.Tensor, ...]] = []
    need = count
    for _ in range(100):
        if need == 0:
            return [torch.cat(parts) for parts in zip(*kept)] if kept else []
        batch = _candidates(ctx, 12 * need + 64, width, height, off_screen)
        ok = unambiguous(*batch, viewmats, Ks, width, height).nonzero().squeeze(1)[:need]
        kept.append(tuple(t[ok] for t in batch))
        need -= ok.numel()
    raise RuntimeError("could not draw gaussians clear of every threshold")


def draw_gaussians(ctx, count: int, viewmats, Ks, width: int, height: int) -> tuple[torch.Tensor, ...]:
    """`count` gaussians (means, quats, scales) in random order, ON_SCREEN of them near the middle
    of the views (seen by most cameras), the others off every camera's screen, with radii and
    culling unambiguous for every camera: candidates are drawn in batches and the first clear ones
    kept."""
    seen = round(ON_SCREEN * count)
    parts = [
        p
        for p in (
            _draw_clear(ctx, seen, viewmats, Ks, width, height, False),
            _draw_clear(ctx, count - seen, viewmats, Ks, width, height, True),
        )
        if p
    ]
    order = ctx.randperm(count)
    return tuple(torch.cat(ts)[order].contiguous() for ts in zip(*parts))


def make_inputs(ctx):
    """Rank r holds N_r gaussians (7N/8 <= N_r <= N, drawn alike on every rank) and C cameras of
    an H x W image; the arguments after the tensors are the public suite's."""
    d = ctx.dims
    n, c, width, height, world = d["N"], d["C"], d["W"], d["H"], ctx.world_size
    counts = (n - ctx.randint(0, n // 8 + 1, world, shared=True)).tolist()
    viewmats, Ks = draw_cameras(ctx, world * c, width, height)
    means, quats, scales = draw_gaussians(ctx, counts[ctx.rank], viewmats, Ks, width, height)
    opacities = ctx.rand(counts[ctx.rank], low=0.1, high=0.9)
    colors = ctx.rand(counts[ctx.rank], COLOR_CHANNELS)
    mine = slice(ctx.rank * c, (ctx.rank + 1) * c)
    return (
        means,
        quats,
        scales,
        opacities,
        colors,
        viewmats[mine].contiguous(),
        Ks[mine].contiguous(),
        width,
        height,
        EPS2D,
        NEAR_PLANE,
        FAR_PLANE,
        "pinhole",
    )


# ---------------------------------------------------------------------------------------------
# The solution.
# ---------------------------------------------------------------------------------------------


@torch.no_grad()
def solution(
    means,
    quats,
    scales,
    opacities,
    colors,
    viewmats,
    Ks,
    image_width,
    image_height,
    eps2d=EPS2D,
    near_plane=NEAR_PLANE,
    far_plane=FAR_PLANE,
    camera_model="pinhole",
):
    """gsplat's distributed projection: every rank projects its gaussians into every rank's cameras,
    keeps the visible (gaussian, camera) pairs and sends each to the rank owning the camera. Returns
    this rank's rows (camera_ids, gaussian_ids, radii, means2d, depths, conics, opacities, colors),
    ordered by source rank, then camera, then gaussian."""
    if camera_model != "pinhole":
        raise ValueError(f"only pinhole cameras, got {camera_model!r}")
    world = dist.get_world_size()
    dev, dtype = means.device, means.dtype
    n_local, c_local = means.shape[0], viewmats.shape[0]

    # Every rank's gaussian count and cameras (the same number C per rank).
    counts = torch.empty(world, dtype=torch.int64, device=dev)
    dist.all_gather_into_tensor(counts, torch.tensor([n_local], dtype=torch.int64, device=dev))
    cams = torch.cat([viewmats.reshape(c_local, 16), Ks.reshape(c_local, 9)], dim=1).contiguous()
    all_cams = torch.empty(world * c_local, 25, dtype=cams.dtype, device=dev)
    dist.all_gather_into_tensor(all_cams, cams)
    all_viewmats = all_cams[:, :16].reshape(-1, 4, 4).float()
    all_Ks = all_cams[:, 16:].reshape(-1, 3, 3).float()

    # Project in fp32, round the outputs to the inputs' dtype once.
    covars = world_covariances(quats.float(), scales.float())
    p = project(means.float(), covars, all_viewmats, all_Ks, image_width, image_height, eps2d, near_plane, far_plane)
    camera, gaussian = p["visible"].nonzero(as_tuple=True)  # camera-major, then gaussian
    dest = camera // c_local
    send_counts = torch.bincount(dest, minlength=world)
    # gsplat's id convention: a gaussian's global id is its index on its own rank plus the number
    # of gaussians on the ranks before the *receiving* rank.
    first = torch.cumsum(counts, 0) - counts
    ints = torch.stack(
        [
            camera % c_local,
            gaussian + first[dest],
            p["radii"][camera, gaussian, 0].long(),
            p["radii"][camera, gaussian, 1].long(),
        ],
        dim=1,
    )
    floats = torch.cat(
        [
            p["means2d"][camera, gaussian],
            p["depths"][camera, gaussian, None],
            p["conics"][camera, gaussian],
            opacities[gaussian, None].float(),
            colors[gaussian].float(),
        ],
        dim=1,
    ).to(dtype)

    recv_counts = torch.empty_like(send_counts)
    dist.all_to_all_single(recv_counts, send_counts)
    sends, recvs = send_counts.tolist(), recv_counts.tolist()
    got_ints = ints.new_empty(sum(recvs), ints.shape[1])
    got_floats = floats.new_empty(sum(recvs), floats.shape[1])
    dist.all_to_all_single(got_ints, ints, output_split_sizes=recvs, input_split_sizes=sends)
    dist.all_to_all_single(got_floats, floats, output_split_sizes=recvs, input_split_sizes=sends)

    d = colors.shape[1]
    means2d, depths, conics, opac, cols = got_floats.split([2, 1, 3, 1, d], dim=1)
    return (
        got_ints[:, 0].contiguous(),
        got_ints[:, 1].contiguous(),
        got_ints[:, 2:4].int().contiguous(),
        means2d.contiguous(),
        depths.reshape(-1).contiguous(),
        conics.contiguous(),
        opac.reshape(-1).contiguous(),
        cols.contiguous(),
    )
