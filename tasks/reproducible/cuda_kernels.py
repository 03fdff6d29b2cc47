"""CUDA C++ kernels of the reproducible path (kernels.cu), compiled at run time with NVRTC.

- `repro_gemv<MB, R, KT, STAGES, FP16>`: decode GEMV for up to MB rows of x. One program streams
  a block of 128*R rows by one 512-k chunk of the 16-bit weight through shared memory with a
  cp.async pipeline; each thread owns R weight rows and runs their R*MB fp32 FMA chains over k in
  order (`__fmaf_rn`), so the order is the one in config.py. x and the bias are read in place in
  their own dtype. On sm_90 it and its combine are launched as programmatic dependents too.
- `repro_gemv_persistent<MB, FP16, XCOPY, XH>`: decode GEMV for up to 4 rows of x in one launch:
  up to a program per SM walks its share of the rows in groups, one thread per (row, chunk), and
  adds each row's chunk partials in index order itself; one more warp copies the weight in with
  the tensor-memory accelerator (a tensor map per weight, encoded on the host), and with XCOPY x
  first, where the computing threads would take more than one round trip to load it. x is kept in
  shared memory as fp32, or (XH, 16-bit x whose fp32 copy would leave too little room for the
  weight) as its own 16-bit values. Launched as a programmatic dependent of the kernel ahead
  (PROGRAMMATIC_GEMV).
- `repro_sgemm<TM, BK, NS, MINB, SPLIT, FP16>`: prefill GEMM, register-blocked 128 x 128 tiles of
  fp32 FMA chains on CUDA cores (TM x 8 outputs per thread), the same order: running chunk totals
  kept per thread in shared memory, or (SPLIT) one program per tile and chunk writing partial
  tiles for `repro_combine_tiles` (every tile of a small output, or the columns of tiles that
  would make up a large one's last, part-empty wave). x is read from a k-major fp32 copy made by
  `repro_transpose`.
- `repro_sgemm_ws<FP16>`: the same prefill SGEMM warp-specialized for sm_90a (H100, H200): 256 x
  128 tiles, one program per SM, 16 computing warps fed through mbarriers by a loader warpgroup
  (tensor-memory copies of both tiles, the weight's upcast) that hands its registers to them;
  built in a module of its own for sm_90a. Used where its tiles make enough waves (`sgemm`).
- `repro_combine`, `repro_combine_tiles`: add the chunk partials in index order (`__fadd_rn`),
  then the bias.
- `repro_all_reduce`: the deterministic all-reduce in one launch: each rank copies its fp32
  partial into its symmetric buffer, flags every rank, waits for every rank's flag, and adds
  all ranks' buffers in rank order 0..W-1 (`__fadd_rn`).

Built with -fmad=false (every fused multiply-add is an explicit __fmaf_rn), -ftz=false,
-prec-div=true and -prec-sqrt=true: IEEE fp32 with subnormals, for the device's own architecture.
The GEMVs and the SGEMM need sm_80 (`kernels_run_on`), the persistent GEMV sm_90; on older GPUs
those kernels trap and are never launched.
"""

from __future__ import annotations

import functools
import threading
from dataclasses import dataclass
from pathlib import Path

import torch

from tasks.reproducible import cuda_rtc
from tasks.reproducible.config import CHUNK, GEMV_ROWS, sgemm_tail_columns, split_count

NVRTC_OPTIONS = ["-fmad=false", "-ftz=false", "-prec-div=true", "-prec-sqrt=true"]

GEMV_THREADS = 128
# The persistent GEMV's x in shared memory, per chunk: fp32 values, or 16-bit ones (x_half), padded
# so that threads reading the same k of neighbouring chunks hit different banks.
PERSISTENT_X_CHUNK = {False: CHUNK + 4, True: CHUNK + 8}
# The persistent GEMV requests at most this many weight stages ahead of those that are in. With
# every free slot requested at once, a program's stages came in together and were then read one
# after another, holding up the refills: back to back at M = 1, two stages took 4096x4096 from 10.70
# to 10.23 us, 3584x4608 from 10.94 to 10.33 and 4096x14336 from 30.08 to 29.48 (three: 10.30,
# 10.38, 29.57; four: 10.44, 10.76, 29.89; bench/NOTES.md).
PERSISTENT_IN_FLIGHT = 2
# The warp-specialized SGEMM (sm_90a): rows per tile, k per stage, stages, computing threads, and
# the registers per thread its computing and loader warpgroups take with setmaxnreg. The computing
# threads' increase waits until the loader's decrease has freed enough, so the launch must hold
# SGEMM_WS_REGISTERS or the program would never start computing (`launcher` checks).
SGEMM_WS_ROWS = 256
SGEMM_WS_K = 16
SGEMM_WS_STAGES = 3
SGEMM_WS_COMPUTE = 512
SGEMM_WS_THREADS = SGEMM_WS_COMPUTE + 128  # one loader warpgroup
SGEMM_WS_COMPUTE_REGS = 112
SGEMM_WS_LOADER_REGS = 32
SGEMM_WS_REGISTERS = SGEMM_WS_COMPUTE * SGEMM_WS_COMPUTE_REGS + 128 * SGEMM_WS_LOADER_REGS
SOURCE = (
    f"#define CHUNK {CHUNK}\n#define ROWS {GEMV_THREADS}\n"
    f"#define GP_XS {PERSISTENT_X_CHUNK[False]}\n#define GP_XSH {PERSISTENT_X_CHUNK[True]}\n"
    f"#define GP_IN_FLIGHT {PERSISTENT_IN_FLIGHT}\n"
    f"#define WS_ROWS {SGEMM_WS_ROWS}\n#define WS_BK {SGEMM_WS_K}\n#define WS_STAGES {SGEMM_WS_STAGES}\n"
    f"#define WS_COMPUTE {SGEMM_WS_COMPUTE}\n#define WS_COMPUTE_REGS {SGEMM_WS_COMPUTE_REGS}\n"
    f"#define WS_LOADER_REGS {SGEMM_WS_LOADER_REGS}\n"
) + Path(__file__).with_name("kernels.cu").read_text()

# Kernel variants, chosen by timing on an H200 (bench/repro_gemm.py --sweep; figures in
# bench/NOTES.md). Any variant of a kernel gives the same bits: they only decide speed.
# Row-block GEMV, per MB rows of x: (weight rows per thread, k per stage, pipeline stages). Two rows
# per thread for 8 and 16 rows of x, with half-length stages so two programs still fit an SM.
ROW_BLOCK_VARIANTS = {1: (1, 64, 4), 2: (1, 64, 4), 4: (1, 64, 4), 8: (2, 32, 4), 16: (2, 32, 4)}
# Persistent GEMV (M <= 4; config.py says where it is used): (most weight slots, programs per SM);
# it takes as many slots (up to the most, and up to 8) as shared memory holds next to x. Five: back
# to back, 4096x4096 at M = 1 took 10.8 us against 11.5 with the six that fit, 4096x1024 at M = 2
# and 4 6.6 and 7.4 against 7.1 and 7.8, and no decode shape took longer (bench/NOTES.md).
PERSISTENT_MB = (1, 2, 4)
PERSISTENT_VARIANT = (5, 1)
PERSISTENT_THREADS = 256  # computing threads; one more warp issues the copies
PERSISTENT_KT = 64  # k per stage: a 128-byte row of a swizzled copy box
PERSISTENT_MAX_STAGES = 8
PERSISTENT_STATIC_SMEM = 2048  # at least its static shared memory (mbarriers, and what the system reserves)
# x's 8-k pieces the computing threads load in one round trip (GP_XU per thread); past that, the
# kernel's producer copies x in before the weights (XCOPY).
PERSISTENT_X_ONE_TRIP = 4 * PERSISTENT_THREADS
# The persistent GEMV is launched as a programmatic dependent of the kernel ahead of it (it runs on
# sm_90 and newer only, as such launches do): its programs start as that kernel's free their SMs,
# fetch their first stage of weights into L2 while it drains, and wait for it before reading
# anything else or storing; each lets the next such launch start once it has issued its last copy.
# Back to back, one GEMV's weight stream then starts while the last one's ends: up to 10% less
# device time per call at M = 1 (one stage fetched ahead beat none, two, four or all of them), and
# a decode step of the benchmark model took 2.81 instead of 3.12 ms at batch 4 (bench/NOTES.md).
# The row-block GEMV and the combine (sm_90 and newer) go the same way, waiting for the kernel ahead
# before anything else: only the launch gap between kernels is hidden. The bits do not change.
PROGRAMMATIC_GEMV = True
PERSISTENT_PREFETCH_STAGES = 1
# Where the caller says the weight is static (not written by the kernel ahead: frozen inference
# weights), the persistent GEMV copies this many stages into its slots before that kernel ends,
# instead of fetching one into L2: back to back at M = 1, 4096x4096 took 9.5 instead of 10.2 us
# and 3584x4608 9.6 instead of 10.3 (one stage: 9.7 at both; three: 9.8 and 10.0; bench/NOTES.md).
PERSISTENT_EARLY_STAGES = 2
# Prefill SGEMM: (output rows per thread, k per tile, x pipeline stages, programs per SM).
SGEMM_VARIANT = (8, 16, 3, 2)
SGEMM_TILE = 128
SGEMM_TOTALS_BYTES = SGEMM_TILE * SGEMM_TILE * 4  # every output's running total, in shared memory
# The warp-specialized SGEMM takes whole tiles wherever they make at least this many waves of one
# program per SM: at M = 4096 it ran 3-4% faster than the 128 x 128 tiles at two programs per SM
# (bench/NOTES.md); with fewer tiles a part-empty last wave costs it more than the other kernel,
# which fills each SM with two.
SGEMM_WS_MIN_WAVES = 3


def _b(flag: bool) -> str:
    return "true" if flag else "false"


@functools.cache
def gemv_name(mb: int, fp16: bool, variant: tuple[int, int, int] | None = None) -> str:
    r, kt, stages = variant or ROW_BLOCK_VARIANTS[mb]
    return f"repro_gemv<{mb}, {r}, {kt}, {stages}, {_b(fp16)}>"


@functools.cache
def gemv_persistent_name(mb: int, fp16: bool, x_copy: bool, x_half: int = 0) -> str:
    """x_half: 0 (x kept as fp32), or the dtype code of 16-bit x kept as it is (no x_copy then)."""
    return f"repro_gemv_persistent<{mb}, {_b(fp16)}, {_b(x_copy)}, {x_half}>"


@functools.cache
def sgemm_name(fp16: bool, split: bool, variant: tuple[int, int, int, int] = SGEMM_VARIANT) -> str:
    tm, bk, ns, minb = variant
    return f"repro_sgemm<{tm}, {bk}, {ns}, {minb}, {_b(split)}, {_b(fp16)}>"


@functools.cache
def sgemm_ws_name(fp16: bool) -> str:
    return f"repro_sgemm_ws<{_b(fp16)}>"


# Parameter counts of each kernel family, for the launchers.
_NPARAMS = {"repro_gemv<": 15, "repro_gemv_persistent<": 15, "repro_sgemm<": 12, "repro_sgemm_ws<": 8,
            "repro_combine_tiles": 10, "repro_combine": 8, "repro_all_reduce": 8, "repro_transpose": 7}  # fmt: skip
# Parameters passed by value as tensor maps, per kernel family.
_TENSOR_MAP_PARAMS = {"repro_gemv_persistent<": (0,), "repro_sgemm_ws<": (0, 1)}

NAMES = (
    [gemv_name(mb, fp16) for mb in GEMV_ROWS for fp16 in (False, True)]
    + [gemv_persistent_name(mb, fp16, copy) for mb in PERSISTENT_MB for fp16 in (False, True) for copy in (False, True)]
    + [gemv_persistent_name(mb, fp16, False, xh) for mb in PERSISTENT_MB for fp16 in (False, True) for xh in (1, 2)]
    + [sgemm_name(fp16, split) for fp16 in (False, True) for split in (False, True)]
    + ["repro_combine", "repro_combine_tiles", "repro_all_reduce", "repro_transpose"]
)

# Kernels that need sm_90a's architecture-specific instructions: built together in a module of
# their own for sm_90a (kernels.cu sees REPRO_SM90A), so that the rest stays an sm_90 build.
SM90A_NAMES = [sgemm_ws_name(fp16) for fp16 in (False, True)]
SM90A_OPTIONS = [*NVRTC_OPTIONS, "-DREPRO_SM90A"]

_lock = threading.Lock()
_launchers: dict[tuple[int, str], cuda_rtc.Launcher] = {}


def launcher(name: str) -> cuda_rtc.Launcher:
    """The kernel `name` compiled for the current device. The default kernels (NAMES) compile
    together on first use, the sm_90a ones (SM90A_NAMES) likewise; any other instantiation (a
    sweep's variant) compiles on its own."""
    dev = torch.cuda.current_device()
    with _lock:
        if (dev, name) not in _launchers:
            if name in SM90A_NAMES:
                names = SM90A_NAMES
                mod = cuda_rtc.compile_module(SOURCE, names, SM90A_OPTIONS, arch_suffix="a")
                for n in names:
                    held = cuda_rtc.registers(mod.functions[n]) * SGEMM_WS_THREADS
                    if held < SGEMM_WS_REGISTERS:
                        raise RuntimeError(f"{n} launches with {held} registers, fewer than its warpgroups take")
            else:
                names = NAMES if name in NAMES else [name]
                mod = cuda_rtc.compile_module(SOURCE, names, NVRTC_OPTIONS)
            max_smem = max_dynamic_smem()
            for n in names:
                fn = mod.functions[n]
                cuda_rtc.set_dynamic_smem(fn, max_smem - cuda_rtc.static_smem(fn))
                family = next(f for f in _NPARAMS if n.startswith(f))
                structs = {i: cuda_rtc.TENSOR_MAP_BYTES for i in _TENSOR_MAP_PARAMS.get(family, ())}
                _launchers[(dev, n)] = cuda_rtc.Launcher(fn, _NPARAMS[family], structs, dev)
        return _launchers[(dev, name)]


@functools.cache
def _device_limits(index: int) -> tuple[int, int]:
    """(SMs, shared memory one program may use: the opt-in maximum) of CUDA device `index`,
    looked up once: decode calls ask on every launch."""
    props = torch.cuda.get_device_properties(index)
    return props.multi_processor_count, int(getattr(props, "shared_memory_per_block_optin", 48 * 1024))


@functools.cache
def _capability(index: int) -> tuple[int, int]:
    return torch.cuda.get_device_capability(index)


def _programmatic(index: int) -> bool:
    """Whether the GEMV kernels launch as programmatic dependents on CUDA device `index`."""
    return PROGRAMMATIC_GEMV and _capability(index) >= (9, 0)


def kernels_run_on(index: int) -> bool:
    """Whether the GEMV and SGEMM kernels run on CUDA device `index`: their copies need cp.async
    (sm_80). Older GPUs take the Triton tiles (same bits); the combine, transpose and all-reduce
    kernels run anywhere."""
    return _capability(index) >= (8, 0)


def max_dynamic_smem() -> int:
    """Shared memory one program may use on the current device (opt-in maximum)."""
    return _device_limits(torch.cuda.current_device())[1]


def ptx() -> str:
    """The module's PTX, compiled with the same options, for audits."""
    return cuda_rtc.compile_ptx(SOURCE, NAMES, NVRTC_OPTIONS)


def sm90a_ptx() -> str:
    """The PTX of the sm_90a kernels (SM90A_NAMES), for audits; only on such a device."""
    return cuda_rtc.compile_ptx(SOURCE, SM90A_NAMES, SM90A_OPTIONS, arch_suffix="a")


def sgemm_ws_runs_on(index: int) -> bool:
    """Whether the warp-specialized SGEMM runs on CUDA device `index`: sm_90a code runs on compute
    capability 9.0 alone."""
    return _capability(index) == (9, 0)


def gemv_smem_bytes(mb: int, variant: tuple[int, int, int] | None = None) -> int:
    r, kt, stages = variant or ROW_BLOCK_VARIANTS[mb]
    return stages * GEMV_THREADS * r * (kt * 2 + 16) + CHUNK * mb * 4


# The weights every path takes: 16-bit, loaded as such and upcast in registers.
WEIGHT_DTYPES = (torch.bfloat16, torch.float16)


def gemv_supports(weight: torch.Tensor) -> bool:
    """Rows of 16-bit values at a stride that keeps every row 16-byte aligned."""
    strides = weight.stride()
    if weight.dtype not in WEIGHT_DTYPES or strides[-1] != 1:
        return False
    outer = zip(strides[:-1], weight.shape[:-1])
    return weight.data_ptr() % 16 == 0 and all(st % 8 == 0 for st, size in outer if size > 1)


_DTYPE_CODES = {torch.float32: 0, torch.bfloat16: 1, torch.float16: 2}


def _as_kernel_input(t: torch.Tensor) -> torch.Tensor:
    """t as the kernels read it in place: fp32, bf16 or fp16 with unit stride in the last dim."""
    if t.dtype not in _DTYPE_CODES:
        t = t.float()
    return t if t.stride(-1) == 1 else t.contiguous()


def _bias_input(bias: torch.Tensor | None, device: torch.device) -> torch.Tensor | None:
    """An optional bias as the kernels read it, on their device (the caller keeps it alive until
    the launch)."""
    return _as_kernel_input(bias.to(device)) if bias is not None else None


def _input_args(t: torch.Tensor | None) -> tuple[int, int]:
    """The (pointer, dtype code) parameter pair of an optional kernel input: (0, 0) for none."""
    return (t.data_ptr(), _DTYPE_CODES[t.dtype]) if t is not None else (0, 0)


def _require_gemv_weight(weight: torch.Tensor) -> None:
    if not gemv_supports(weight):
        raise ValueError("the GEMV needs 16-bit weight rows, 16-byte aligned, with strides that are multiples of 8")


def gemv(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, *, variant: tuple[int, int, int] | None = None
) -> torch.Tensor:
    """fp32 [M, N] for x [M, K] (any float dtype) and weight [N, K] bf16/fp16 (gemv_supports):
    the row-block kernel and its combine."""
    return gemv_batched(x[None], weight[None], bias, variant=variant)[0]


def gemv_persistent_fits(
    m: int, n: int, k: int, variant: tuple[int, int] = PERSISTENT_VARIANT, x_dtype: torch.dtype = torch.float32
) -> bool:
    """Whether the persistent GEMV takes an (M, N, K) problem with x of `x_dtype` (x and two weight
    slots must fit)."""
    if m > PERSISTENT_MB[-1]:
        return False
    return gemv_persistent_plan(next(r for r in PERSISTENT_MB if r >= m), n, k, variant, x_dtype) is not None


def persistent_group(n: int, k: int, programs: int) -> int:
    """Rows per group of the persistent GEMV: each program's rows in equal groups of at most
    256 / S rows (S chunks), so its last group is not a nearly empty one."""
    most = PERSISTENT_THREADS // split_count(k)
    rows = -(-n // programs)
    return -(-rows // -(-rows // most))


def _persistent_rows_read(n: int, k: int, programs: int) -> tuple[int, int]:
    """(weight rows all programs read, most rows one program reads). A program copies whole groups,
    so where its rows are not a multiple of the group, its last group reads on into the next
    program's rows (past N the copy reads nothing)."""
    group = persistent_group(n, k, programs)
    total = most = 0
    for b in range(programs):
        begin, end = n * b // programs, n * (b + 1) // programs
        rows = -(-(end - begin) // group) * group
        total += min(rows, n - begin)
        most = max(most, rows)
    return total, most


def persistent_programs(n: int, k: int, most: int) -> int:
    """Programs of the persistent GEMV, at most `most` (one per SM): of `most` down to 7/8 of it,
    the count that reads the fewest weight rows without giving any program more to read than
    `most` programs would; the larger among equals. Decode is bound by the weight's bytes, and
    rows read twice cost as much as any (Llama's 4096 rows over 132 SMs in groups of 8: 4224 rows
    read, 4096 over 128; bench/NOTES.md)."""
    most = max(1, min(n, most))
    best, (best_total, limit) = most, _persistent_rows_read(n, k, most)
    for programs in range(most - 1, max(1, most * 7 // 8) - 1, -1):
        total, longest = _persistent_rows_read(n, k, programs)
        if longest <= limit and total < best_total:
            best, best_total = programs, total
    return best


@dataclass(frozen=True)
class PersistentPlan:
    """How the persistent GEMV runs one problem: programs, rows per group, weight slots, the
    shared memory that takes, and whether x is kept as its 16-bit values."""

    programs: int
    group: int
    stages: int
    smem: int
    x_half: bool = False


def gemv_persistent_plan(
    mb: int, n: int, k: int, variant: tuple[int, int] = PERSISTENT_VARIANT, x_dtype: torch.dtype = torch.float32
) -> PersistentPlan | None:
    """The launch for MB rows of x of `x_dtype` on the current device, or None where fewer than
    two weight slots (or than PERSISTENT_IN_FLIGHT) fit next to x. x is kept as fp32, or, where
    that leaves too little room and x is 16-bit, as its 16-bit values (half the room, upcast as it
    is read) where each program has more than one group of rows."""
    device = torch.cuda.current_device()
    plan = _persistent_plan(mb, n, k, variant, device, False)
    if plan is None and x_dtype in (torch.bfloat16, torch.float16):
        plan = _persistent_plan(mb, n, k, variant, device, True)
    return plan


@functools.lru_cache(maxsize=1024)
def _persistent_plan(
    mb: int, n: int, k: int, variant: tuple[int, int], device: int, x_half: bool
) -> PersistentPlan | None:
    most_stages, per_sm = variant
    s = split_count(k)
    if s > PERSISTENT_THREADS or _capability(device) < (9, 0):  # the tensor-memory accelerator: sm_90
        return None
    sms, smem_max = _device_limits(device)
    programs = persistent_programs(n, k, sms * per_sm)
    group = persistent_group(n, k, programs)
    if x_half and -(-n // programs) <= group:
        # One group per program: upcasting x at every read then lost to the row-block GEMV (K =
        # 14336, N = 1024, M = 3 and 4: 16.7-18.3 against 15.6 us); from two groups up it won
        # (N = 1536 to 4096: 1.01x to 1.2x; K = 18944, N = 1024 at M = 2: 1.15x; bench/NOTES.md).
        return None
    # S boxes of G rows x 128 bytes, each 1024-byte aligned (one merged box of S*G rows never takes more)
    slot = s * -(-group * 128 // 1024) * 1024
    x_bytes = mb * s * PERSISTENT_X_CHUNK[x_half] * (2 if x_half else 4)
    fixed = 1024 + x_bytes + 2 * mb * s * group * 4  # alignment, x, partials
    room = smem_max // per_sm - PERSISTENT_STATIC_SMEM - fixed
    stages = min(most_stages, PERSISTENT_MAX_STAGES, room // slot)
    # Two slots at least, and no fewer than the stages in flight (kernels.cu: more would hang).
    fits = stages >= max(2, PERSISTENT_IN_FLIGHT)
    return PersistentPlan(programs, group, stages, fixed + stages * slot, x_half) if fits else None


@functools.lru_cache(maxsize=256)
def _weight_tensor_map(address: int, n: int, k: int, row_stride: int, group: int, merged: bool) -> bytes | None:
    """The persistent GEMV's copy boxes over one weight: G rows x 64 k, or, merged, S chunks x G
    rows x 64 k of the weight seen as [S][N][CHUNK] (K a multiple of CHUNK: one copy per stage;
    None if the driver refuses that view, whose chunk stride is below its row stride). A pure
    function of its arguments (a later tensor at the same address and layout gets the same map),
    so it is cached."""
    if merged:
        s = k // CHUNK
        try:
            return cuda_rtc.encode_tensor_map(
                address, (CHUNK, n, s), (row_stride * 2, CHUNK * 2), (PERSISTENT_KT, group, s)
            )
        except RuntimeError:
            return None
    return cuda_rtc.encode_tensor_map(address, (k, n), (row_stride * 2,), (PERSISTENT_KT, group))


def persistent_copies_x(mb: int, k: int) -> bool:
    """Whether the persistent GEMV's producer copies fp32-kept x in (XCOPY): where the computing
    threads would take more than one round trip to load it."""
    return mb * split_count(k) * (CHUNK // 8) > PERSISTENT_X_ONE_TRIP


def gemv_persistent(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    mb: int = 0,
    variant: tuple | None = None,
    static_weight: bool = False,
) -> torch.Tensor:
    """fp32 [M, N] for x [M, K] and weight [N, K] (gemv_supports, gemv_persistent_fits) in one
    launch, x and bias read in their own dtype; `mb` (row capacity >= M) and `variant` default to
    the smallest capacity and the chosen variant. `static_weight`: the caller vouches that the
    kernel launched just before this one on the stream does not write the weight, so its copies
    may start before that kernel ends (same bits)."""
    _require_gemv_weight(weight)
    m, k = x.shape
    n = weight.shape[0]
    if m > PERSISTENT_MB[-1]:
        raise ValueError(f"the persistent GEMV takes at most {PERSISTENT_MB[-1]} rows of x, got {m}")
    mb = mb or next(r for r in PERSISTENT_MB if r >= m)
    x = _as_kernel_input(x)
    plan = gemv_persistent_plan(mb, n, k, variant or PERSISTENT_VARIANT, x.dtype)
    if plan is None:
        raise ValueError(f"the persistent GEMV does not fit shared memory at M={m} (capacity {mb}), K={k}")
    b = _bias_input(bias, x.device)
    out = torch.empty((m, n), dtype=torch.float32, device=x.device)
    # One row's stride does not matter; the map needs a multiple of 16 bytes all the same.
    row_stride = weight.stride(0) if n > 1 else -(-k // 8) * 8
    wmap = _weight_tensor_map(weight.data_ptr(), n, k, row_stride, plan.group, True) if k % CHUNK == 0 else None
    merged = wmap is not None
    wmap = wmap or _weight_tensor_map(weight.data_ptr(), n, k, row_stride, plan.group, False)
    x_half = _DTYPE_CODES[x.dtype] if plan.x_half else 0
    x_copy = not x_half and persistent_copies_x(mb, k)
    programmatic = _programmatic(x.device.index)
    launcher(gemv_persistent_name(mb, weight.dtype == torch.float16, x_copy, x_half))(
        (plan.programs, 1, 1), PERSISTENT_THREADS + 32, plan.smem,
        wmap, int(merged), plan.stages, PERSISTENT_PREFETCH_STAGES if programmatic else 0,
        PERSISTENT_EARLY_STAGES if programmatic and static_weight else 0, *_input_args(x),
        x.stride(0) if m > 1 else k, *_input_args(b), out.data_ptr(), m, n, k, plan.group,
        programmatic=programmatic,
    )  # fmt: skip
    return out


def gemv_batched(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None, *, variant: tuple | None = None
) -> torch.Tensor:
    """fp32 [B, M, N] for x [B, M, K] and weight [B, N, K]; every entry in the reproducible order."""
    bsz, m, k = x.shape
    n = weight.shape[1]
    _require_gemv_weight(weight)
    dev = x.device
    x = _as_kernel_input(x)
    ldx = x.stride(1) if m > 1 else k
    x_batch = x.stride(0) if bsz > 1 else 0
    s = split_count(k)
    mb = next(r for r in GEMV_ROWS if r >= min(m, GEMV_ROWS[-1]))
    variant = variant or ROW_BLOCK_VARIANTS[mb]
    mblocks = (m + mb - 1) // mb
    out = torch.empty((bsz, m, n), dtype=torch.float32, device=dev)
    partial = torch.empty((bsz, s, m, n), dtype=torch.float32, device=dev) if s > 1 else out
    b = _bias_input(bias, dev) if s == 1 else None  # with chunk partials, the combine adds it
    ldw = weight.stride(1) if n > 1 else k
    w_batch = weight.stride(0) if bsz > 1 else 0
    rows = GEMV_THREADS * variant[0]
    grid = ((n + rows - 1) // rows, s, bsz * mblocks)
    launcher(gemv_name(mb, weight.dtype == torch.float16, variant))(
        grid, GEMV_THREADS, gemv_smem_bytes(mb, variant),
        *_input_args(x), ldx, x_batch, weight.data_ptr(), ldw, w_batch, *_input_args(b), out.data_ptr(),
        partial.data_ptr(), m, n, k, mblocks, programmatic=_programmatic(dev.index),
    )  # fmt: skip
    if s > 1:
        combine(partial, bias, out)
    return out


def sgemm_threads(variant: tuple[int, int, int, int] = SGEMM_VARIANT) -> int:
    return SGEMM_TILE * SGEMM_TILE // (variant[0] * 8)


def sgemm_smem_bytes(split: bool, variant: tuple[int, int, int, int] = SGEMM_VARIANT) -> int:
    _, bk, ns, _ = variant  # x stages, two fp32 weight tiles, the 16-bit copy of one, totals
    return (ns + 2) * bk * SGEMM_TILE * 4 + bk * SGEMM_TILE * 2 + (0 if split else SGEMM_TOTALS_BYTES)


def transpose_to_f32(x: torch.Tensor, rows: int) -> torch.Tensor:
    """x [M, K] (fp32, bf16 or fp16) as a k-major fp32 copy [K, rows] (rows >= M, a multiple of 4:
    the kernel stores four columns at a time; columns past M are left unwritten), exactly."""
    x = _as_kernel_input(x)
    m, k = x.shape
    if rows < m or rows % 4:
        raise ValueError(f"the k-major copy needs at least M = {m} columns, a multiple of 4; got {rows}")
    xt = torch.empty((k, rows), dtype=torch.float32, device=x.device)
    if m and k:
        launcher("repro_transpose")(
            (-(-k // 64), -(-m // 64), 1), 256, 0, *_input_args(x), x.stride(0), xt.data_ptr(), rows, m, k
        )  # fmt: skip
    return xt


def sgemm_ws_smem_bytes() -> int:
    """The warp-specialized SGEMM's shared memory: its slots' 1024-byte alignment, x, the 16-bit
    and the fp32 weight per stage, and every output's running total."""
    per_stage = SGEMM_WS_K * (SGEMM_WS_ROWS * 4 + SGEMM_TILE * 2 + SGEMM_TILE * 4)
    return 1024 + SGEMM_WS_STAGES * per_stage + SGEMM_WS_ROWS * SGEMM_TILE * 4


def _sgemm_ws_pays(m: int, n: int, index: int) -> bool:
    """Whether the default launch takes the warp-specialized SGEMM for an M x N output."""
    sms, smem = _device_limits(index)
    tiles = -(-m // SGEMM_WS_ROWS) * -(-n // SGEMM_TILE)
    return sgemm_ws_runs_on(index) and sgemm_ws_smem_bytes() <= smem and tiles >= SGEMM_WS_MIN_WAVES * sms


@functools.lru_cache(maxsize=256)  # pure functions of their arguments, asked on every prefill call
def _sgemm_ws_maps(xt_address: int, rows: int, k: int, w_address: int, n: int, row_stride: int) -> tuple[bytes, bytes]:
    """The warp-specialized SGEMM's copy boxes: [SGEMM_WS_K, SGEMM_WS_ROWS] of x's k-major fp32
    copy (rows columns), and [128 rows, SGEMM_WS_K] of the 16-bit weight, 32-byte swizzled."""
    xmap = cuda_rtc.encode_tensor_map(
        xt_address, (rows, k), (rows * 4,), (SGEMM_WS_ROWS, SGEMM_WS_K),
        dtype=cuda_rtc.TENSOR_MAP_FLOAT32, swizzle=cuda_rtc.TENSOR_MAP_SWIZZLE_NONE,
    )  # fmt: skip
    wmap = cuda_rtc.encode_tensor_map(
        w_address, (k, n), (row_stride * 2,), (SGEMM_WS_K, SGEMM_TILE), swizzle=cuda_rtc.TENSOR_MAP_SWIZZLE_32B
    )
    return xmap, wmap


def sgemm(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    *,
    split: bool = False,
    tail_columns: int | None = None,
    variant: tuple[int, int, int, int] | None = None,
    wide: bool | None = None,
) -> torch.Tensor:
    """fp32 [M, N] for x [M, K] and weight [N, K] (16-bit rows, gemv_supports, K % 8 == 0).
    Whole tiles, but the last `tail_columns` columns of tiles (default:
    config.sgemm_tail_columns for this GPU) split by chunk; `split`: every tile split. Split tiles
    run one program per (tile, chunk) of 128 x 128, their partials added in index order by
    repro_combine_tiles. Whole tiles are 256 x 128 for the warp-specialized kernel (`wide`;
    default: where _sgemm_ws_pays, unless a `variant` of the other kernel is asked for) and
    128 x 128 otherwise."""
    m, k = x.shape
    n = weight.shape[0]
    if k % 8 or not gemv_supports(weight):
        raise ValueError("the SGEMM needs K % 8 == 0 and 16-bit weight rows, 16-byte aligned")
    dev = x.device
    if wide is None:
        wide = variant is None and not split and _sgemm_ws_pays(m, n, dev.index)
    if wide and not sgemm_ws_runs_on(dev.index):
        raise ValueError("the warp-specialized SGEMM needs compute capability 9.0 (sm_90a)")
    variant = variant or SGEMM_VARIANT
    mp = (m + SGEMM_TILE - 1) // SGEMM_TILE * SGEMM_TILE
    mtiles, ncols, chunks = mp // SGEMM_TILE, -(-n // SGEMM_TILE), split_count(k)
    if split:
        tail_columns = ncols
    elif tail_columns is None:
        sms = _device_limits(dev.index)[0]
        whole_mtiles = -(-m // SGEMM_WS_ROWS) if wide else mtiles
        tail_columns = sgemm_tail_columns(whole_mtiles, ncols, chunks, sms if wide else sms * variant[3])
    tail_columns = min(tail_columns, ncols) if chunks > 1 else 0
    xt = transpose_to_f32(x, mp)  # columns past M feed outputs that are never stored
    out = torch.empty((m, n), dtype=torch.float32, device=dev)
    b = _bias_input(bias, dev)
    b_args = _input_args(b)
    fp16, threads = weight.dtype == torch.float16, sgemm_threads(variant)
    row_stride = weight.stride(0) if n > 1 else k
    args = (xt.data_ptr(), mp, weight.data_ptr(), row_stride)
    first = ncols - tail_columns
    if first and wide:
        maps = _sgemm_ws_maps(xt.data_ptr(), mp, k, weight.data_ptr(), n, row_stride)
        launcher(sgemm_ws_name(fp16))(
            (-(-m // SGEMM_WS_ROWS), first, 1), SGEMM_WS_THREADS, sgemm_ws_smem_bytes(),
            *maps, *b_args, out.data_ptr(), m, n, k,
        )  # fmt: skip
    elif first:
        launcher(sgemm_name(fp16, False, variant))(
            (mtiles, first, 1), threads, sgemm_smem_bytes(False, variant),
            *args, *b_args, out.data_ptr(), 0, m, n, k, 0,
        )  # fmt: skip
    if tail_columns:
        tiles = mtiles * tail_columns
        partial = torch.empty((chunks, tiles, SGEMM_TILE * SGEMM_TILE), dtype=torch.float32, device=dev)
        launcher(sgemm_name(fp16, True, variant))(
            (mtiles, tail_columns, chunks), threads, sgemm_smem_bytes(True, variant),
            *args, 0, 0, out.data_ptr(), partial.data_ptr(), m, n, k, first,
        )  # fmt: skip
        launcher("repro_combine_tiles")(
            _combine_grid(partial[0].numel()), COMBINE_THREADS, 0,
            partial.data_ptr(), *b_args, out.data_ptr(), m, n, mtiles, first, tiles, chunks,
        )  # fmt: skip
    return out


COMBINE_THREADS = 256


def _combine_grid(outputs: int) -> tuple[int, int, int]:
    """The grid of a combine kernel, whose threads stride over `outputs` values: a thread per
    value, up to the grid's 65535 blocks."""
    return (max(1, min(-(-outputs // COMBINE_THREADS), 65535)), 1, 1)


def combine(partial: torch.Tensor, bias: torch.Tensor | None, out: torch.Tensor) -> None:
    """out[b, m, n] = partial[b, 0] + partial[b, 1] + ... (index order) + bias, NaN canonical."""
    bsz, s, m, n = partial.shape
    b = _bias_input(bias, out.device)
    launcher("repro_combine")(
        _combine_grid(bsz * m * n), COMBINE_THREADS, 0,
        partial.data_ptr(), *_input_args(b), out.data_ptr(), bsz, m * n, n, s,
        programmatic=_programmatic(out.device.index),
    )  # fmt: skip


# The all-reduce's blocks (its flags in every rank's buffer are sized for this many), and threads
# per block (one flags and waits for each rank, so this many ranks at most).
ALL_REDUCE_MAX_BLOCKS = 256  # = AR_MAX_BLOCKS in kernels.cu
ALL_REDUCE_THREADS = 256  # = its __launch_bounds__


def all_reduce_flag_floats(world: int) -> int:
    """fp32 slots the all-reduce's flags and call counters take after the data halves."""
    return 2 * ALL_REDUCE_MAX_BLOCKS * (world + 1)


def all_reduce(partial: torch.Tensor, ptrs_dev: int, world: int, rank: int, half: int, out: torch.Tensor) -> None:
    """out = buf_0 + buf_1 + ... + buf_{W-1} (fp32, rank order) after this rank's 1-D `partial` is
    copied into its buffer: one launch over symmetric-memory buffers of 2 * half data floats
    (half >= numel, a multiple of 4) then all_reduce_flag_floats(world), zeroed when made."""
    if world > ALL_REDUCE_THREADS:
        raise ValueError(f"the all-reduce kernel takes up to {ALL_REDUCE_THREADS} ranks, not {world}")
    n = partial.numel()
    blocks = max(1, min(ALL_REDUCE_MAX_BLOCKS, -(-n // 4096)))  # one pass of 4 vectors per thread
    launcher("repro_all_reduce")(
        (blocks, 1, 1), ALL_REDUCE_THREADS, 0,
        partial.data_ptr(), int(partial.data_ptr() % 16 == 0), ptrs_dev, world, rank, out.data_ptr(), n, half,
    )  # fmt: skip
