import torch
import torch.distributed as dist

IOU_THRESHOLD = 0.7
NO_OBJECT_LOGIT = -10.0
# No pair of masks has an IoU within this distance of the threshold: every honest way to compare
# intersection/union with 0.7 (fp32 or fp64 division, integer cross-multiplication) agrees.
MARGIN = 1e-3


def _iou_counts(binary: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Intersections and unions (float32, exact integers: counts below 2^24) of (n, H, W) boolean
    masks."""
    flat = binary.flatten(1).float()
    inter = flat @ flat.T
    area = flat.sum(dim=1)
    return inter, area[:, None] + area[None, :] - inter


def _draw_masks(ctx, total: int, side: int) -> torch.Tensor:
    """(total, side, side) float32 mask logits, shared by every rank. Objects come in clusters:
    each is its cluster's rectangle with every edge moved by up to side/32, so that pairs of one
    cluster overlap with IoUs on both sides of the threshold; 0.2% of pixels flip sign. Drawn again
    while a pair's IoU lies within MARGIN of the threshold."""
    jitter = max(1, side // 32)
    yy = torch.arange(side, device=ctx.device).view(1, side, 1)
    xx = torch.arange(side, device=ctx.device).view(1, 1, side)
    pairs = torch.triu(torch.ones(total, total, dtype=torch.bool), diagonal=1)
    for _ in range(100):
        clusters = max(1, total // 3)
        which = ctx.randint(0, clusters, total, shared=True)
        lo = ctx.randint(0, side // 2, clusters, 2, shared=True)
        extent = ctx.randint(side // 4, side // 2, clusters, 2, shared=True)
        move = ctx.randint(-jitter, jitter + 1, total, 4, shared=True)
        top, left = lo[which, 0] + move[:, 0], lo[which, 1] + move[:, 1]
        bottom, right = top + extent[which, 0] + move[:, 2], left + extent[which, 1] + move[:, 3]
        inside = ((yy >= top.view(-1, 1, 1)) & (yy < bottom.view(-1, 1, 1))
                  & (xx >= left.view(-1, 1, 1)) & (xx < right.view(-1, 1, 1)))
        noise = ctx.randn(total, side, side, dtype=torch.float32, shared=True)
        inside ^= noise.abs() > 3.09  # about 0.2% of pixels
        logits = torch.where(inside, 0.25 + noise.abs(), -0.25 - noise.abs())
        inter, union = (c.cpu().double() for c in _iou_counts(logits > 0))
        iou = inter / union.clamp_min(1.0)
        if bool(((iou - IOU_THRESHOLD).abs()[pairs] >= MARGIN).all()):
            return logits
    raise RuntimeError("could not draw masks clear of the IoU threshold")


def make_inputs(ctx):
    """Rank r holds counts[r] masks (1 to 2*O - 1 objects, drawn alike on every rank) of side R."""
    o, side, world = ctx.dims["O"], ctx.dims["R"], ctx.world_size
    counts = [int(c) for c in ctx.randint(1, 2 * o, world, shared=True).cpu().tolist()]
    total, first = sum(counts), sum(counts[: ctx.rank])
    masks = _draw_masks(ctx, total, side)[first : first + counts[ctx.rank]]
    scores = ctx.randn(counts[ctx.rank])
    # Frame index of each object's last occlusion, -1 for never: ties are frequent (no suppression).
    last_occluded = ctx.randint(-1, 4, total, shared=True)
    reverse = bool(ctx.randint(0, 2, 1, shared=True).item())
    return (masks.to(ctx.dtype), scores, counts, last_occluded, IOU_THRESHOLD, reverse, None)


def _gather_uneven(x: torch.Tensor, counts: list[int], group) -> torch.Tensor:
    """Concatenation over ranks of (counts[r], ...) tensors, padded to the largest count for an
    all-gather of equal sizes (gloo has no uneven all-gather)."""
    most = max(counts)
    padded = x.new_zeros((most, *x.shape[1:]))
    padded[: x.shape[0]] = x
    everyone = x.new_empty((len(counts) * most, *x.shape[1:]))
    dist.all_gather_into_tensor(everyone, padded, group=group)
    return torch.cat([everyone[r * most : r * most + c] for r, c in enumerate(counts)])


@torch.no_grad()
def solution(low_res_masks_local, obj_scores_local, num_obj_per_gpu, last_occluded, iou_threshold=0.7,
             reverse=False, group=None):
    """SAM3's multi-GPU tracker step: all-gather every rank's object masks and scores, then, among
    pairs of objects whose binary masks (logit > 0) overlap with IoU >= iou_threshold, suppress the
    one occluded more recently (with reverse, less recently), provided the other was occluded at
    some point (last_occluded > -1): its mask becomes -10 everywhere. Returns (masks (N, H, W) fp32,
    scores (N,) fp32, suppressed (N,) bool) on every rank."""
    group = group or dist.group.WORLD
    counts = [int(c) for c in num_obj_per_gpu]
    masks = _gather_uneven(low_res_masks_local.float(), counts, group)
    scores = _gather_uneven(obj_scores_local.float(), counts, group)

    n = masks.shape[0]
    inter, union = _iou_counts(masks > 0)
    iou = inter / union.clamp_min(1.0)
    overlap = torch.triu(iou >= iou_threshold, diagonal=1)
    last = last_occluded.to(device=masks.device, dtype=torch.long)
    later = last[:, None] < last[None, :] if reverse else last[:, None] > last[None, :]
    # Pair (i, j), i < j: i goes if it is "later" than an occluded j, and j if it is later than i.
    drop_i = (overlap & later & (last[None, :] > -1)).any(dim=1)
    drop_j = (overlap & later.T & (last[:, None] > -1)).any(dim=0)
    suppressed = drop_i | drop_j if n > 1 else torch.zeros(n, dtype=torch.bool, device=masks.device)
    masks[suppressed] = NO_OBJECT_LOGIT
    return masks, scores, suppressed
