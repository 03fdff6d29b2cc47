"""DeepMD's distributed Kalman filter optimizer (the FEKF/RLEKF update of DeePMD-kit's PyTorch
trainer): one extended-Kalman step of a model whose weights are split into blocks, each with its
own error covariance, the blocks spread over the ranks.

Rank r holds NB blocks i: the gradient H_i (N, 1) of the prediction with respect to the block's
weights, the weights w_i (N, 1) and the covariance P_i (N, N), all float64, its scalar error e
(0-dim float64), and the memory factors lambda and nue. With
  a = 1 / (sum over every rank's blocks of (lambda + H_i^T P_i H_i)),
each block updates K_i = P_i H_i, w_i += a * e * K_i, P_i = (P_i - a K_i K_i^T) / lambda. The call
solution(H, error, weights, P, lambda, nue) returns (weights, P, lambda_next): the updated weights
of every rank's blocks in rank order (a list of W*NB tensors (N, 1)), this rank's NB updated
covariances, and lambda_next = nue*lambda + 1 - nue (0-dim float64).

Roofline per GPU (float64, 8 bytes; CUDA-core FP64 on H100 runs at the fp32 peak of the profile,
so the phases use unit fp32). Four phases: the scalar a needs every rank's sum, the covariance
update needs a, the gathered weights need every rank's update.
1. H^T P H per block (keeping K = P H): 2*N^2 + 2*N FLOPs a block; HBM reads P and H and writes K,
   NB*(N^2 + 2N)*8.
2. all-reduce of one scalar: 2*(W-1)/W * 8 bytes over NVLink.
3. covariance and weight update: 3*N^2 + 2*N FLOPs a block (the rank-one update and the scale);
   HBM reads P, K, w and writes P and w, NB*(2*N^2 + 3N)*8. Each P is read twice: a needs the
   global sum first.
4. all-gather of the updated weights: (W-1)*NB*N*8 bytes over NVLink; HBM writes W*NB*N*8.
At the default shape (NB = 8, N = 1024) HBM-bound: three passes over 64 MiB of covariances.
"""

from tasks.spec import Phase, Problem, Shape, Tolerance


def roofline(dims, world_size, dtype):
    nb, n = dims["NB"], dims["N"]
    w = world_size
    return [
        Phase("H^T P H", flops=nb * (2 * n * n + 2 * n), hbm_bytes=nb * (n * n + 2 * n) * 8, unit="fp32"),
        Phase("all_reduce", comm_bytes=2 * (w - 1) / w * 8, unit="fp32"),
        Phase("covariance update", flops=nb * (3 * n * n + 2 * n), hbm_bytes=nb * (2 * n * n + 3 * n) * 8,
              unit="fp32"),
        Phase("all_gather weights", hbm_bytes=w * nb * n * 8, comm_bytes=(w - 1) * nb * n * 8, unit="fp32"),
    ]


PROBLEM = Problem(
    id="deepmd_kalman_filter_optimizer",
    pkb_id=63,
    title="DeePMD distributed Kalman filter optimizer step",
    level=3,
    parallelism="non-LLM",
    origin="DeePMD-kit (FEKF / RLEKF optimizer)",
    description=(
        "One step of DeePMD's extended Kalman filter optimizer, float64. Every rank holds NB weight blocks: lists "
        "H (gradients, (N, 1) each), weights ((N, 1) each), P (covariances, (N, N) each), its scalar error e "
        "(0-dim) and the floats kalman_lambda, kalman_nue: solution(H, error, weights, P, kalman_lambda, "
        "kalman_nue). Compute a = 1 / sum over all ranks' blocks of (lambda + H^T P H) (one all-reduce), then per "
        "block K = P H, weights += a*e*K, P = (P - a K K^T) / lambda; return (every rank's updated weights in rank "
        "order, a list of W*NB (N, 1) tensors; this rank's updated P list; lambda_next = nue*lambda + 1 - nue as a "
        "0-dim float64 tensor). HBM-bound (each covariance is read twice and written once)."
    ),
    shapes=(
        Shape("small", {"NB": 2, "N": 16}),
        Shape("default", {"NB": 8, "N": 1024}, default=True),
        Shape("large", {"NB": 8, "N": 2048}),
    ),
    roofline=roofline,
    dtype="float64",
    tolerance=Tolerance(
        atol=1e-15,
        rtol=2.0**-50,
        atol_unit="rms",
        reason="measured against a reordered float64 computation (H^T (P H), K from H^T P^T, P/lambda - (a/lambda) "
        "K K^T, sums over blocks and ranks reversed) at W=2 and 4, small and default shapes: weights and covariances "
        "differ by at most 4.5e-19 rms beyond rtol 2^-50, a 2000x margin for GPU summation orders; float32 "
        "arithmetic errs by 5e-7 to 5e-6 rms and fails",
    ),
)
