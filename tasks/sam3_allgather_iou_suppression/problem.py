"""SAM3 multi-GPU tracking: all-gather every rank's object masks and scores, then suppress
overlapping objects by their occlusion history.

Rank r holds low_res_masks_local (n_r, R, R) bf16 mask logits of its n_r objects, obj_scores_local
(n_r,) bf16, num_obj_per_gpu (the list of every n_r, the same on every rank), last_occluded (N,)
int64 for all N objects (-1: never occluded), iou_threshold = 0.7 and reverse. On every rank it
returns (masks (N, R, R) fp32, scores (N,) fp32, suppressed (N,) bool): the gathered masks and
scores, where among pairs i < j whose binary masks (logit > 0) have IoU >= 0.7 the object occluded
later (earlier with reverse) is suppressed, if the other one was occluded at all (> -1); a
suppressed object's mask is -10 everywhere.

Decisions are exact: the draws leave no pair's IoU within 1e-3 of 0.7 (objects are jittered
rectangles of a few clusters, 0.2% of pixels flipped), intersections and unions are integer counts,
and the masks are copies: every output is compared bit for bit.

Roofline per GPU, O objects per rank on average (N = W*O), R*R pixels, e = 2 bytes, two phases:
1. all-gather: each rank sends its masks and scores to W-1 peers, (W-1)*O*(R*R + 1)*e bytes; HBM
   reads its own (O*R*R*e) and writes the gathered fp32 masks and scores (4*N*(R*R + 1)), keeping a
   bit-packed copy of the binary masks (N*R*R/8) for phase 2.
2. IoU + suppression: the N x N intersections are a binary GEMM over R*R pixels, 2*N*N*R*R FLOPs
   (exact on bf16 tensor cores with fp32 accumulation); HBM reads the bit-packed masks (N*R*R/8).
   Overwriting suppressed masks (a data-dependent share) is not counted.
NVLink-bound at the default shape (phase 1), the IoU GEMM being small.
"""

from tasks.spec import BITWISE, Phase, Problem, Shape, dtype_bytes


def roofline(dims, world_size, dtype):
    o, pixels, w, e = dims["O"], dims["R"] * dims["R"], world_size, dtype_bytes(dtype)
    n = w * o
    return [
        Phase("all_gather masks + scores", hbm_bytes=o * pixels * e + 4 * n * (pixels + 1) + n * pixels / 8,
              comm_bytes=(w - 1) * o * (pixels + 1) * e, unit="bf16_tc"),
        Phase("pairwise mask IoU + suppression", flops=2 * n * n * pixels, hbm_bytes=n * pixels / 8, unit="bf16_tc"),
    ]


PROBLEM = Problem(
    id="sam3_allgather_iou_suppression",
    pkb_id=81,
    title="SAM3 all-gather + mask-IoU suppression",
    level=3,
    parallelism="non-LLM",
    origin="SAM3 (multi-GPU video tracker: suppression of overlapping objects)",
    description=(
        "Rank r holds low_res_masks_local (n_r, R, R) bf16 mask logits, obj_scores_local (n_r,) bf16, "
        "num_obj_per_gpu (list of every rank's n_r, 1 to 2*O - 1, the same list on every rank), last_occluded "
        "(N,) int64 (N = sum n_r; -1 = never occluded), iou_threshold = 0.7, reverse (bool) and group = None. "
        "Return on every rank (masks (N, R, R) fp32, scores (N,) fp32, suppressed (N,) bool): the all-gathered "
        "masks and scores in rank order; for each pair i < j whose binary masks (logit > 0) have IoU >= "
        "iou_threshold, suppress i if last_occluded[i] > last_occluded[j] > -1 and j if last_occluded[j] > "
        "last_occluded[i] > -1 (with reverse, < instead of > between the two); suppressed masks are set to "
        "-10. The draws keep every IoU at least 1e-3 away from the threshold, so all outputs are exact and "
        "compared bit for bit. An uneven all-gather then a small binary GEMM; NVLink-bound at the default "
        "shape."
    ),
    shapes=(
        Shape("small", {"O": 2, "R": 64}),
        # The public suite's size: 1 to 3 objects per rank, 256 x 256 low-resolution masks.
        Shape("default", {"O": 2, "R": 256}, default=True),
        Shape("large", {"O": 16, "R": 256}),
    ),
    roofline=roofline,
    world_sizes=(1, 2, 4, 8),
    tolerance=BITWISE,
    mode_notes=(
        "cpu and shared-gpu (gloo): the public reference's all_gather of unequal sizes is refused by gloo "
        "when ranks hold different object counts; this reference pads to the largest count and runs on gloo"
    ),
)
