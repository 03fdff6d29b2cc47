"""The fixed configuration table and the reduction order it implies.

The order (every path — CPU emulation, CUDA GEMV, Triton tiles — computes exactly this):

    C = CHUNK (512), S = split_count(K) = ceil(K / C)
    for each output (m, n) and each chunk s in 0..S-1:
        p_s = +0.0
        for k in s*C .. min((s+1)*C, K) - 1, ascending:
            p_s = fma(x[m, k], w[n, k], p_s)          # IEEE fp32, one rounding
    y = p_0; then y = y + p_s for s = 1..S-1            # fp32 adds, index order
    if bias: y = y + b[n]
    NaN outputs are stored as the canonical quiet NaN 0x7FC00000

x and w are upcast to fp32 exactly (bf16/fp16 -> fp32 is exact); subnormals are kept (no
flush-to-zero anywhere). Nothing in the order depends on M, N, the GPU, or the launch
configuration, so a row computed in any batch equals that row computed alone, and any launch
configuration below gives the same bits: the configuration only decides speed.

Padding inside a block is neutral: padded k positions multiply x = -0.0 by w = +0.0, a product of
-0.0, and adding -0.0 leaves every fp32 value (including +0.0 and -0.0) unchanged.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

# Chunk length of the K split. A constant, so the split count depends on K alone. 512 keeps the
# partial traffic of decode at M=16 near 4*M/CHUNK = 12% of the weight bytes while giving a
# 4096-row layer 8 chunks, enough independent chains to fill the GPU.
CHUNK = 512

# Rows of x one CUDA GEMV program keeps in registers (the decode kernel is instantiated for each).
GEMV_ROWS = (1, 2, 4, 8, 16)


def split_count(k: int) -> int:
    """Number of chunks of the K reduction: a function of K alone."""
    if k < 1:
        raise ValueError(f"K must be >= 1, got {k}")
    return (k + CHUNK - 1) // CHUNK


def chunk_bounds(k: int) -> list[tuple[int, int]]:
    """[(k_begin, k_end), ...] of every chunk, in combination order."""
    return [(s * CHUNK, min((s + 1) * CHUNK, k)) for s in range(split_count(k))]


def m_bucket(m: int) -> str:
    """decode (M <= 16), small (M <= 64) or prefill."""
    if m < 1:
        raise ValueError(f"M must be >= 1, got {m}")
    if m <= 16:
        return "decode"
    if m <= 64:
        return "small"
    return "prefill"


@dataclass(frozen=True)
class LaunchConfig:
    """How one problem is launched. None of these fields changes the bits of the result.

    kernel: "gemv" (CUDA C++, weights streamed through shared memory, M <= 16 rows per program,
    chunk partials added by a second kernel), "gemv_persistent" (CUDA C++, M <= 4, one program per
    SM walking row groups, weights copied by the tensor-memory accelerator, chunk partials added in
    the same launch), "sgemm" (CUDA C++, register-blocked tiles: 128 x 128, or 256 x 128
    warp-specialized on sm_90a where they make enough waves) or "tile" (Triton, fp32 FMA dot; the
    block_* fields, warps and stages apply to it). split_parallel ("sgemm" and
    "tile"): chunks run in separate programs and a second kernel adds their partials in index
    order; otherwise one program walks every chunk of its tile in order and adds them as it goes.
    """

    kernel: str
    block_m: int = 16
    block_n: int = 128
    block_k: int = 32
    num_warps: int = 4
    num_stages: int = 3
    split_parallel: bool = False

    def __post_init__(self) -> None:
        if self.kernel not in ("gemv", "gemv_persistent", "sgemm", "tile"):
            raise ValueError(f"unknown kernel {self.kernel!r}")
        if self.kernel == "tile":
            for name in ("block_m", "block_n", "block_k"):
                v = getattr(self, name)
                if v < 16 or v & (v - 1):
                    raise ValueError(f"{name} must be a power of two >= 16, got {v}")
            if CHUNK % self.block_k:
                raise ValueError(f"block_k {self.block_k} must divide the chunk length {CHUNK}")


# Per bucket: the default launch, chosen by timing on an H200 (bench/repro_gemm.py --sweep; the
# figures are in bench/NOTES.md).
DEFAULTS: dict[str, LaunchConfig] = {
    "decode": LaunchConfig("gemv"),
    "small": LaunchConfig("gemv"),
    "prefill": LaunchConfig("sgemm"),
}

# Per (bucket, N, K) exceptions, for the Llama-3.1-8B-like and Qwen-like layer shapes.
TABLE: dict[tuple[str, int, int], LaunchConfig] = {}

# Up to this many rows of x: the persistent GEMV, one launch instead of the row-block GEMV's two
# or three, wherever its x and two weight slots fit shared memory (else the row-block GEMV). It was
# faster at every layer shape measured at M = 1 and M = 4 (bench/NOTES.md).
PERSISTENT_GEMV = LaunchConfig("gemv_persistent")
PERSISTENT_GEMV_MAX_ROWS = 4

# Prefill with fewer 128 x 128 output tiles than this (fewer than one per SM of an H200): one
# program per (tile, chunk) and a combine. At 32 and 64 tiles that was 2x to 4x faster than whole
# tiles; at 128 and 592 tiles (M = 512) whole tiles were 3% to 7% faster, at 448 about 3% slower
# (bench/NOTES.md).
# The partials take S whole tiles of fp32 per output tile: split only while that stays within this
# many bytes.
SPLIT_SGEMM = LaunchConfig("sgemm", split_parallel=True)
SPLIT_SGEMM_BELOW_TILES = 128
SPLIT_SGEMM_MAX_PARTIAL_BYTES = 1 << 30

# Whole-tile prefill whose last wave would leave SMs idle (fewer tiles than the GPU runs at once:
# SMs x programs per SM): the last columns of tiles, enough to hold that wave's tiles, run instead
# as one program per (tile, chunk), their partials added in index order by a combine, where that
# split wave is at most this share of a whole wave long (ceil(tiles x chunks / slots) / chunks).
SGEMM_TAIL_SPLIT_MAX_WAVE = 0.75


def sgemm_tail_columns(mtiles: int, ncols: int, chunks: int, slots: int) -> int:
    """How many of a whole-tile SGEMM's last columns of tiles (mtiles tiles each, ncols columns)
    to split by chunk (0: none), with `chunks` chunks per tile on a GPU that runs `slots`
    programs at once."""
    waves, tail = divmod(mtiles * ncols, slots)
    if not waves or not tail or chunks < 2:
        return 0
    cols = -(-tail // mtiles)
    return cols if -(-cols * mtiles * chunks // slots) / chunks <= SGEMM_TAIL_SPLIT_MAX_WAVE else 0


# Triton fallbacks for weights the CUDA kernels cannot stream (rows not 16-byte aligned, or K not
# a multiple of 8 for the SGEMM).
DECODE_TILE = LaunchConfig("tile", block_m=16, block_n=64, block_k=32, num_warps=4, num_stages=3, split_parallel=True)
PREFILL_TILE = LaunchConfig("tile", block_m=128, block_n=128, block_k=16, num_warps=4, num_stages=3)


@functools.lru_cache(maxsize=4096)  # decode asks on every call; the table above is fixed at import
def launch_config(m: int, n: int, k: int) -> LaunchConfig:
    """The launch for an (M, N, K) problem: a pure function of the shape."""
    bucket = m_bucket(m)
    if (bucket, n, k) in TABLE:
        return TABLE[(bucket, n, k)]
    if m <= PERSISTENT_GEMV_MAX_ROWS:
        return PERSISTENT_GEMV
    tiles = -(-m // 128) * -(-n // 128)
    if (
        bucket == "prefill"
        and tiles < SPLIT_SGEMM_BELOW_TILES
        and split_count(k) * tiles * 128 * 128 * 4 <= SPLIT_SGEMM_MAX_PARTIAL_BYTES
    ):
        return SPLIT_SGEMM
    return DEFAULTS[bucket]
