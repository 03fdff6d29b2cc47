"""Muon's Newton-Schulz orthogonalisation of a tensor-parallel (column-sharded) matrix.

A gradient matrix X (R, N) is sharded by columns: rank r holds X[:, r*N/W : (r+1)*N/W] in bf16. The
call is solution(x, 5, "quintic", 1, None). Each rank returns its columns of the orthogonalised
matrix, (R, N/W) bf16: in fp32, X is divided by its Frobenius norm (over all ranks' columns, at
least 1e-7), then five quintic Newton-Schulz steps X <- a_i X + (b_i G + c_i G G) X with
G = X X^T (R x R) and Muon's quintic coefficients, one triple per step. Only the Gram matrix needs
every rank: it is a sum of the ranks' column products, all-reduced at every step (and the squared
norm once); G G and the update are computed on every rank.

Roofline per GPU, n = N/W local columns, fp32 working copy (4 bytes). Every step needs the previous
step's X and its Gram matrix, so the phases of the five steps are summed:
0. normalisation: read x (R*n*e), write the fp32 copy (4*R*n); all-reduce one scalar (left out).
per step:
1. Gram matrix + all-reduce, tiles reduced as they finish: 2*R^2*n FLOPs; HBM read X and write G,
   (R*n + R^2)*4; NVLink a ring all-reduce of G in fp32, 2*(W-1)/W*R^2*4.
2. polynomial update: G G (2*R^3, the same on every rank) and (b G + c G G) X (2*R^2*n): HBM read G
   twice and X, write G G and X, (3*R^2 + 2*R*n)*4 (+ the bf16 output, R*n*e, after the last step).
FLOPs count on fp32 CUDA cores: the contract is fp32 arithmetic, and TF32 tensor cores (10-bit
mantissa) are lower precision than it. At the default shape (R = N = 512) on an H100 at W=4, per
step: the Gram phase is NVLink-bound (3.5 us of all-reduce against 1.0 us of compute), the update
compute-bound (5.0 us, mostly the replicated G G): 25 us of compute and 17.5 us of NVLink over the
five steps, compute-bound overall.
"""

from tasks.spec import Phase, Problem, Shape, Tolerance, dtype_bytes


def roofline(dims, world_size, dtype):
    r, n_global = dims["R"], dims["N"]
    w, e = world_size, dtype_bytes(dtype)
    n = n_global // w
    phases = [Phase("normalise", hbm_bytes=r * n * e + 4 * r * n, unit="fp32")]
    for step in range(5):
        last = step == 4
        phases += [
            Phase(f"step {step + 1}: gram + all-reduce", flops=2 * r * r * n, hbm_bytes=(r * n + r * r) * 4,
                  comm_bytes=2 * (w - 1) / w * r * r * 4, unit="fp32"),
            Phase(f"step {step + 1}: polynomial update", flops=2 * r**3 + 2 * r * r * n,
                  hbm_bytes=(3 * r * r + 2 * r * n) * 4 + (r * n * e if last else 0), unit="fp32"),
        ]
    return phases


PROBLEM = Problem(
    id="tp_muon_orthogonalization",
    pkb_id=86,
    title="Muon Newton-Schulz orthogonalisation, column-sharded",
    level=3,
    parallelism="TP",
    origin="Muon optimizer (distributed Newton-Schulz, e.g. Dion / Moonlight)",
    description=(
        "A matrix X (R, N) is sharded by columns over W ranks: x (R, N/W), bf16. The call is solution(x, 5, "
        "'quintic', 1, None). Return this rank's columns of Muon's orthogonalisation of X, (R, N/W) bf16: in "
        "fp32, divide X by its Frobenius norm over all ranks (at least 1e-7), then five Newton-Schulz steps "
        "X <- a X + (b G + c G G) X with G = X X^T and Muon's quintic coefficients ((4.0848, -6.8946, 2.9270), "
        "(3.9505, -6.3029, 2.6377), (3.7418, -5.5913, 2.3037), (2.8769, -3.1427, 1.2046), (2.8366, -3.0525, "
        "1.2012)), one triple per step. The Gram matrix G (R x R) is a sum over the ranks' columns: the "
        "reference all-reduces it at every step (and the squared norm once). The arithmetic is fp32 (TF32 "
        "is too coarse). Compute-bound at the default shape (G G, R^3 on every rank), the all-reduces next."
    ),
    shapes=(
        Shape("small", {"R": 16, "N": 32}),
        Shape("default", {"R": 512, "N": 512}, default=True),
        Shape("large", {"R": 512, "N": 1024}),
    ),
    roofline=roofline,
    world_sizes=(1, 2, 4, 8),
    tolerance=Tolerance(
        atol=1e-4,
        rtol=2.0**-7,
        atol_unit="rms",
        reason=(
            "measured at W=2 and 4 (small, default and large shapes): the reference on gloo is within 1.5e-6 rms "
            "(at rtol 2^-7) of the same maths in float64, and the iteration in fp32 on one process, in another "
            "order, within 2.1e-5 rms: 1e-4 rms is a 4.8x margin. Newton-Schulz amplifies rounding in the small "
            "singular directions, so TF32 products (2.2e-3 to 3.4e-3 rms) and a bf16 iteration (2e-2 rms) fail"
        ),
    ),
)
