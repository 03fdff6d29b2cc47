"""Tensor-parallel MLP block between sequence-parallel regions: gather the hidden dimension,
y = silu(x @ W1) @ W2 for this rank's rows, reduce-scatter over rows.

Each rank r holds x_r, the M x H/W column slice of the activations x = [x_0 | ... | x_{W-1}],
and its own W1 (H x F), W2 (F x H). Its output is y_r = silu(x[rows_r] @ W1) @ W2, the
M/W x H block of rows rows_r = [r*M/W, (r+1)*M/W). The reference computes x @ W1 for all M rows
and reduce-scatters a buffer that is zero outside rank r's rows, so the reduce-scatter only
moves zeros: the only data a rank needs from others is x[rows_r] restricted to their columns.

Roofline, Ml = M/W, Hl = H/W, e bytes per element, W ranks. One phase: a tile of rows can be
fetched, multiplied by W1, activated and multiplied by W2 in a pipeline; a tile's activations
(rows x F) stay on chip when F is processed in chunks that each add into the W2 product.
- FLOPs: 2*Ml*H*F + 2*Ml*F*H per GPU on bf16 tensor cores (silu negligible, not counted).
- NVLink: rank r needs an Ml x Hl block from each of the W-1 others, and sends as much:
  (W-1) * Ml*Hl*e per GPU.
- HBM: read x_r (all of it: its row blocks go to their owners), W1 and W2; write y_r:
  (M*Hl + 2*H*F + Ml*H) * e.
"""

from tasks.spec import Phase, Problem, Shape, Tolerance, dtype_bytes


def roofline(dims, world_size, dtype):
    m, h, f = dims["M"], dims["H"], dims["F"]
    e = dtype_bytes(dtype)
    w = world_size
    m_local, h_local = m / w, h / w
    return [
        Phase(
            "row exchange + mlp",
            flops=4 * m_local * h * f,
            hbm_bytes=(m * h_local + 2 * h * f + m_local * h) * e,
            comm_bytes=(w - 1) * m_local * h_local * e,
            unit="bf16_tc",
        )
    ]


PROBLEM = Problem(
    id="combined_sharded_gemms",
    pkb_id=15,
    title="Combined sharded GEMMs (TP MLP with SP boundaries)",
    level=3,
    parallelism="TP",
    origin="Megatron-LM",
    description=(
        "Every rank holds x_r, an M x (H/W) bf16 column slice of the activations "
        "x = [x_0 | ... | x_{W-1}], and its own bf16 weights W1 (H x F) and W2 (F x H). Rank r "
        "returns y_r = silu(x[rows_r] @ W1) @ W2 for its block of rows rows_r = [r*M/W, (r+1)*M/W) "
        "(M/W x H, bf16). The reference all-gathers x, runs the first GEMM on every row, and "
        "reduce-scatters a zero-padded buffer: the pattern of an MLP between sequence-parallel "
        "regions. A rank only needs its own rows of the other ranks' slices, so the optimum is a "
        "small all-to-all feeding two local GEMMs. HBM-bound (weights) at the default shape, compute-bound "
        "at the large one."
    ),
    shapes=(
        Shape("small", {"M": 64, "H": 64, "F": 128}),
        Shape("default", {"M": 1024, "H": 256, "F": 512}, default=True),
        Shape("large", {"M": 8192, "H": 4096, "F": 14336}),
    ),
    roofline=roofline,
    tolerance=Tolerance(
        atol=0.03,
        rtol=2e-2,
        reason=(
            "bf16 reference (activations rounded to bf16 between the GEMMs) vs fp64 measured 0.0067 beyond "
            "rtol at W=8 on the default shape; a solution keeping fp32 activations differs by as much; "
            "over 3x margin"
        ),
    ),
)
