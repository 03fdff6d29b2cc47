"""3x3 Conv2d of an image split by rows across ranks, with a one-row halo exchange: spatial
(patch) parallelism of a diffusion UNet's convolutions.

The P ranks (rank 0 on top) each hold H/P rows of a (B, C, H, W) image; the 3x3 weight (C, C, 3, 3)
and bias (C) are the same on every rank; stride 1, padding 1 (as the public suite fixes them).
Output: this rank's H/P rows of the zero-padded convolution of the whole image. The halo is the
row above (from rank r-1, zeros on rank 0) and the row below (from rank r+1, zeros on the last).
Channel counts of the SDXL UNet (320, 640, 1280); the largest shape is the public suite's: 1280
channels, a 128 x 128 latent in a two-image batch whose images are stacked along the height,
H = 256 rows split over the P ranks.

Roofline per GPU, e bytes per element, R = H/P rows per rank, two phases (the first and last
output rows need the halo; the interior could start at once, but the halo's time is negligible
and the conv is not worth splitting around it):
1. halo P2P: a middle rank sends its top row up and its bottom row down, 2*B*C*W*e bytes over
   NVLink (an end rank sends one row; at P = 2 both ranks are ends, so B*C*W*e).
2. conv2d (an implicit GEMM): 2*B*R*W*C*C*9 FLOPs on bf16 tensor cores (bias adds negligible);
   HBM reads the input rows and the weight and writes the output: (2*B*C*R*W + 9*C*C + C)*e.
Compute-bound at the default and large shapes at every world size (9*C FLOPs per output
element, C >= 320); the tiny CI shape is HBM-bound.
"""

from tasks.spec import Phase, Problem, Shape, Tolerance, dtype_bytes


def roofline(dims, world_size, dtype):
    b, c, h, w = dims["B"], dims["C"], dims["H"], dims["W"]
    e = dtype_bytes(dtype)
    rows = h // world_size
    halos_sent = 2 if world_size > 2 else 1
    return [
        Phase("halo p2p", comm_bytes=halos_sent * b * c * w * e, unit="bf16_tc"),
        Phase(
            "conv2d",
            flops=2 * b * rows * w * c * c * 9,
            hbm_bytes=(2 * b * c * rows * w + 9 * c * c + c) * e,
            unit="bf16_tc",
        ),
    ]


PROBLEM = Problem(
    id="conv2d_boundary_exchange",
    pkb_id=87,
    title="Row-parallel Conv2d with halo exchange",
    level=2,
    parallelism="non-LLM",
    origin="DistriFusion (patch-parallel SDXL UNet)",
    description=(
        "An image is split by rows across the ranks, rank 0 on top: every rank holds x (B, C, H/P, W), "
        "bf16, and the same 3x3 weight (C, C, 3, 3) and bias (C), bf16, with stride 1 and padding 1. "
        "Return this rank's rows of the zero-padded 3x3 convolution of the whole image, (B, C, H/P, W), "
        "bf16. The rows just outside a rank's slice come from its neighbours (the row above from rank "
        "r-1, the row below from rank r+1; zeros at the image's top and bottom): a point-to-point halo "
        "exchange before the convolution, as in patch-parallel diffusion UNets. Compute-bound: the halo "
        "is one row each way."
    ),
    shapes=(
        Shape("small", {"B": 1, "C": 16, "H": 16, "W": 8}),
        Shape("default", {"B": 1, "C": 320, "H": 128, "W": 64}, default=True),
        Shape("large", {"B": 1, "C": 1280, "H": 256, "W": 128}),
    ),
    roofline=roofline,
    tolerance=Tolerance(
        atol=1e-3,
        rtol=1e-2,
        reason=(
            "outputs of unit size: the bf16 reference measured within one bf16 ulp (2^-8 relative) of the "
            "same math in float64 and in fp32 rounded to bf16; beyond rtol 1e-2 at most 7e-7, small and "
            "default shapes at W=2 and 4. rtol 1e-2 is 2.5x one ulp; atol 1e-3 covers summation-order "
            "differences where an output crosses zero"
        ),
    ),
)
