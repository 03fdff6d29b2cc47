"""CUDA C++ kernels of the reproducible path, compiled at run time with NVRTC.

- `repro_gemv<MB, R, KT, FP16>`: decode GEMV for up to MB rows of x. One program streams a block
  of 128*R rows by one 512-k chunk of the 16-bit weight through shared memory with a 4-stage
  cp.async pipeline; each thread owns R weight rows and runs their R*MB fp32 FMA chains over k in
  order (`__fmaf_rn`), so the order is the one in config.py. x (fp32 rows) is read in place.
- `repro_sgemm<FP16>`: prefill GEMM, register-blocked 128 x 128 tiles of fp32 FMA chains on CUDA
  cores, the same order (running chunk totals kept per thread in shared memory).
- `repro_combine`: adds the chunk partials in index order (`__fadd_rn`), then the bias.
- `repro_rank_sum`: the deterministic all-reduce's sum: every rank reads every rank's fp32
  buffer (symmetric-memory pointers) in rank order 0..W-1 and adds sequentially.

Built with -fmad=false (every fused multiply-add is an explicit __fmaf_rn), -ftz=false,
-prec-div=true and -prec-sqrt=true: IEEE fp32 with subnormals.
"""

from __future__ import annotations

import threading

import torch

from tasks.reproducible import cuda_rtc
from tasks.reproducible.config import CHUNK, GEMV_ROWS

GEMV_THREADS = 128
GEMV_STAGES = 4


def gemv_shape(mb: int) -> tuple[int, int]:
    """(weight rows per thread, k per pipeline stage) of the GEMV for MB rows of x. Two rows per
    thread for 8 and 16 rows of x, with half-length stages so two programs still fit an SM."""
    return (2, 32) if mb >= 8 else (1, 64)


def gemv_rows_per_program(mb: int) -> int:
    return GEMV_THREADS * gemv_shape(mb)[0]


NVRTC_OPTIONS = ["-fmad=false", "-ftz=false", "-prec-div=true", "-prec-sqrt=true"]

_DEFINES = f"#define CHUNK {CHUNK}\n#define ROWS {GEMV_THREADS}\n#define STAGES {GEMV_STAGES}\n"

_BODY = r"""
#define CANONICAL_NAN 0x7fc00000

__device__ __forceinline__ unsigned smem_u32(const void* p) {
  unsigned r;
  asm volatile("{ .reg .u64 a; cvta.to.shared.u64 a, %1; cvt.u32.u64 %0, a; }" : "=r"(r) : "l"(p));
  return r;
}
__device__ __forceinline__ void cp_async16(unsigned dst, const void* src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" :: "r"(dst), "l"(src), "r"(src_bytes) : "memory");
}
__device__ __forceinline__ void cp_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
__device__ __forceinline__ void cp_wait_stages() { asm volatile("cp.async.wait_group %0;" :: "n"(STAGES - 2) : "memory"); }

__device__ __forceinline__ float lo16(unsigned v, bool fp16) {
  if (fp16) { float f; unsigned short h = (unsigned short)(v & 0xffffu); asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f; }
  return __uint_as_float(v << 16);
}
__device__ __forceinline__ float hi16(unsigned v, bool fp16) {
  if (fp16) { float f; unsigned short h = (unsigned short)(v >> 16); asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f; }
  return __uint_as_float(v & 0xffff0000u);
}
__device__ __forceinline__ float canonical(float y) { return y != y ? __uint_as_float(CANONICAL_NAN) : y; }

// Batched: entry b reads x + b*x_batch (MB rows of fp32 at stride ldx), rows of w + b*w_batch at
// stride ldw (a multiple of 8, 16-byte aligned), and writes out + b*M*N ([M, N]) or its partials
// partial + b*S*M*N ([S, M, N]). blockIdx.z = b * mblocks + (row block of MB rows of x).
// Each thread owns R weight rows (tid + j*ROWS): every x value read from shared memory feeds R*MB
// chains, which keeps the 8- and 16-row kernels from being bound by shared-memory broadcasts.
template <int MB, int R, int KT, bool FP16>
__global__ void __launch_bounds__(ROWS) repro_gemv(
    const float* __restrict__ x, long long ldx, long long x_batch, const unsigned short* __restrict__ w,
    long long ldw, long long w_batch, const float* __restrict__ bias, float* __restrict__ out,
    float* __restrict__ partial, int M, int N, int K, int mblocks, int has_bias) {
  constexpr int ROW_B = KT * 2 + 16;  // 16 bytes of padding keep 16-byte row reads conflict-free
  constexpr int ROWS_CTA = ROWS * R;
  extern __shared__ __align__(16) unsigned char smem[];
  unsigned char* ws = smem;
  float* xs = reinterpret_cast<float*>(smem + STAGES * ROWS_CTA * ROW_B);  // [MB][CHUNK]
  const int tid = threadIdx.x;
  const int n0 = blockIdx.x * ROWS_CTA;
  const int s = blockIdx.y;
  const int S = gridDim.y;
  const int b = blockIdx.z / mblocks;
  const int m0 = (blockIdx.z % mblocks) * MB;
  x += (size_t)b * x_batch;
  w += (size_t)b * w_batch;
  out += (size_t)b * M * N;
  partial += (size_t)b * S * M * N;
  const int kbeg = s * CHUNK;
  const int klen = min(CHUNK, K - kbeg);
  const int nstages = (klen + KT - 1) / KT;

  // Weight stages: ROWS_CTA rows x KT k in 16-byte vectors; rows past N and k past the chunk are
  // zero-filled (cp.async copies `bytes` and fills the rest of the 16 with zeros).
  auto issue = [&](int st) {
    if (st < nstages) {
      unsigned char* base = ws + (st % STAGES) * ROWS_CTA * ROW_B;
      const int kst = kbeg + st * KT;
#pragma unroll
      for (int j = 0; j < R * KT / 8; ++j) {
        const int v = tid + j * ROWS;
        const int r = v / (KT / 8), c = v % (KT / 8);
        const int n = n0 + r, k = kst + c * 8;
        const int bytes = (n < N) ? max(0, min(16, (kbeg + klen - k) * 2)) : 0;
        const unsigned short* src = bytes ? (w + (size_t)n * ldw + k) : w;
        cp_async16(smem_u32(base + r * ROW_B + c * 16), src, bytes);
      }
    }
    cp_commit();
  };
#pragma unroll
  for (int st = 0; st < STAGES - 1; ++st) issue(st);

  // x chunk, row-major xs[m][k]. Padding (k past the chunk, rows past M) is -0.0: times a
  // zero-filled weight it gives -0.0, which added to any accumulator leaves it unchanged.
  for (int i = tid; i < MB * CHUNK; i += ROWS) {
    const int m = i / CHUNK, k = i % CHUNK;
    float v = -0.0f;
    if (k < klen && m0 + m < M) v = x[(size_t)(m0 + m) * ldx + kbeg + k];
    xs[i] = v;
  }

  float acc[R][MB];
#pragma unroll
  for (int j = 0; j < R; ++j)
#pragma unroll
    for (int m = 0; m < MB; ++m) acc[j][m] = 0.0f;

  for (int st = 0; st < nstages; ++st) {
    cp_wait_stages();
    __syncthreads();
    issue(st + STAGES - 1);
    const unsigned char* stage = ws + (st % STAGES) * ROWS_CTA * ROW_B;
#pragma unroll
    for (int c = 0; c < KT / 8; ++c) {
      unsigned words[R][4];
#pragma unroll
      for (int j = 0; j < R; ++j) {
        const uint4 q = *reinterpret_cast<const uint4*>(stage + (tid + j * ROWS) * ROW_B + c * 16);
        words[j][0] = q.x; words[j][1] = q.y; words[j][2] = q.z; words[j][3] = q.w;
      }
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int k = st * KT + c * 8 + half * 4;
        float wv[R][4];
#pragma unroll
        for (int j = 0; j < R; ++j) {
          wv[j][0] = lo16(words[j][half * 2], FP16);
          wv[j][1] = hi16(words[j][half * 2], FP16);
          wv[j][2] = lo16(words[j][half * 2 + 1], FP16);
          wv[j][3] = hi16(words[j][half * 2 + 1], FP16);
        }
#pragma unroll
        for (int m = 0; m < MB; ++m) {
          const float4 xv = *reinterpret_cast<const float4*>(xs + m * CHUNK + k);
#pragma unroll
          for (int j = 0; j < R; ++j) {
            acc[j][m] = __fmaf_rn(xv.x, wv[j][0], acc[j][m]);
            acc[j][m] = __fmaf_rn(xv.y, wv[j][1], acc[j][m]);
            acc[j][m] = __fmaf_rn(xv.z, wv[j][2], acc[j][m]);
            acc[j][m] = __fmaf_rn(xv.w, wv[j][3], acc[j][m]);
          }
        }
      }
    }
  }

#pragma unroll
  for (int j = 0; j < R; ++j) {
    const int n = n0 + tid + j * ROWS;
    if (n >= N) continue;
    if (S == 1) {
      const float bn = has_bias ? bias[n] : 0.0f;
#pragma unroll
      for (int m = 0; m < MB; ++m) {
        if (m0 + m < M) {
          float y = acc[j][m];
          if (has_bias) y = __fadd_rn(y, bn);
          out[(size_t)(m0 + m) * N + n] = canonical(y);
        }
      }
    } else {
#pragma unroll
      for (int m = 0; m < MB; ++m)
        if (m0 + m < M) partial[((size_t)s * M + (m0 + m)) * N + n] = acc[j][m];
    }
  }
}

// Prefill: a 128 x 128 output tile per program, 256 threads, 8 x 8 outputs per thread held in
// registers, k in steps of 16 through double-buffered shared memory (x from xt [K, ldx] fp32,
// k-major; weight rows [N, K] 16-bit, upcast when stored to shared memory). Each output is one
// __fmaf_rn chain per chunk over k in order; at every chunk end the chain is added into the
// thread's running total (kept in shared memory, private per thread) and restarts from +0.
#define SG_BM 128
#define SG_BN 128
#define SG_BK 16
#define SG_THREADS 256
#define SG_TILES_PER_CHUNK (CHUNK / SG_BK)

template <bool FP16>
__global__ void __launch_bounds__(SG_THREADS, 2) repro_sgemm(
    const float* __restrict__ xt, long long ldx, const unsigned short* __restrict__ w, long long ldw,
    const float* __restrict__ bias, float* __restrict__ out, int M, int N, int K, int has_bias) {
  __shared__ __align__(16) float As[2][SG_BK][SG_BM];
  __shared__ __align__(16) float Bs[2][SG_BK][SG_BN];
  extern __shared__ __align__(16) float totals[];  // [64][SG_THREADS]
  const int tid = threadIdx.x;
  const int tx = tid % 16, ty = tid / 16;
  const int m0 = blockIdx.x * SG_BM, n0 = blockIdx.y * SG_BN;
  const int bn = tid % SG_BN, bh = tid / SG_BN;
  const unsigned short* wrow = w + (size_t)min(n0 + bn, N - 1) * ldw;
  const int ntiles = (K + SG_BK - 1) / SG_BK;
  float4 ra[2];
  uint4 rb;

  auto load = [&](int it) {
    const int k0 = it * SG_BK;
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const int idx = tid + j * SG_THREADS;
      const int k = k0 + idx / 32, m4 = (idx % 32) * 4;
      ra[j] = k < K ? *reinterpret_cast<const float4*>(xt + (size_t)k * ldx + m0 + m4)
                    : make_float4(-0.0f, -0.0f, -0.0f, -0.0f);
    }
    const int kb = k0 + bh * 8;
    rb = kb < K ? *reinterpret_cast<const uint4*>(wrow + kb) : make_uint4(0u, 0u, 0u, 0u);
  };
  auto store = [&](int buf) {
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const int idx = tid + j * SG_THREADS;
      *reinterpret_cast<float4*>(&As[buf][idx / 32][(idx % 32) * 4]) = ra[j];
    }
    const unsigned words[4] = {rb.x, rb.y, rb.z, rb.w};
#pragma unroll
    for (int j = 0; j < 8; ++j) Bs[buf][bh * 8 + j][bn] = (j & 1) ? hi16(words[j >> 1], FP16) : lo16(words[j >> 1], FP16);
  };

  float acc[8][8];
#pragma unroll
  for (int i = 0; i < 8; ++i)
#pragma unroll
    for (int j = 0; j < 8; ++j) acc[i][j] = 0.0f;
  // -0.0 is the identity of addition: total = -0 + p_0 + p_1 + ... = p_0 + p_1 + ...
  for (int i = 0; i < 64; ++i) totals[i * SG_THREADS + tid] = -0.0f;

  load(0);
  store(0);
  __syncthreads();
  for (int it = 0; it < ntiles; ++it) {
    const int buf = it & 1;
    if (it + 1 < ntiles) load(it + 1);
#pragma unroll
    for (int k = 0; k < SG_BK; ++k) {
      const float4 a0 = *reinterpret_cast<const float4*>(&As[buf][k][ty * 4]);
      const float4 a1 = *reinterpret_cast<const float4*>(&As[buf][k][ty * 4 + 64]);
      const float4 b0 = *reinterpret_cast<const float4*>(&Bs[buf][k][tx * 4]);
      const float4 b1 = *reinterpret_cast<const float4*>(&Bs[buf][k][tx * 4 + 64]);
      const float a[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
      const float b[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
#pragma unroll
      for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[i][j] = __fmaf_rn(a[i], b[j], acc[i][j]);
    }
    if (it + 1 < ntiles) store(buf ^ 1);
    __syncthreads();
    if ((it + 1) % SG_TILES_PER_CHUNK == 0 || it + 1 == ntiles) {
#pragma unroll
      for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          float* t = &totals[(i * 8 + j) * SG_THREADS + tid];
          *t = __fadd_rn(*t, acc[i][j]);
          acc[i][j] = 0.0f;
        }
    }
  }

#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const int m = m0 + ty * 4 + (i & 3) + (i >> 2) * 64;
    if (m >= M) continue;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int n = n0 + tx * 4 + h * 64;
      float v[4];
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        float y = totals[(i * 8 + h * 4 + j) * SG_THREADS + tid];
        if (has_bias && n + j < N) y = __fadd_rn(y, bias[n + j]);
        v[j] = canonical(y);
      }
      float* o = out + (size_t)m * N + n;
      if ((N & 3) == 0 && n + 3 < N) {
        *reinterpret_cast<float4*>(o) = make_float4(v[0], v[1], v[2], v[3]);
      } else {
#pragma unroll
        for (int j = 0; j < 4; ++j)
          if (n + j < N) o[j] = v[j];
      }
    }
  }
}

// partial [B, S, MN] -> out [B, MN]: chunk partials added in index order, then the bias.
extern "C" __global__ void repro_combine(const float* __restrict__ partial, const float* __restrict__ bias,
                                         float* __restrict__ out, int B, long long MN, int N, int S, int has_bias) {
  const long long total = (long long)B * MN;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total; i += (long long)gridDim.x * blockDim.x) {
    const long long b = i / MN, r = i - b * MN;
    const float* p = partial + b * S * MN + r;
    float y = p[0];
    for (int s = 1; s < S; ++s) y = __fadd_rn(y, p[(long long)s * MN]);
    if (has_bias) y = __fadd_rn(y, bias[r % N]);
    out[i] = canonical(y);
  }
}

extern "C" __global__ void repro_rank_sum(const unsigned long long* __restrict__ ptrs, int world,
                                          float* __restrict__ out, long long n) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    float y = reinterpret_cast<const volatile float*>(ptrs[0])[i];
    for (int r = 1; r < world; ++r) y = __fadd_rn(y, reinterpret_cast<const volatile float*>(ptrs[r])[i]);
    out[i] = canonical(y);
  }
}
"""

SOURCE = _DEFINES + _BODY


def gemv_name(mb: int, fp16: bool) -> str:
    r, kt = gemv_shape(mb)
    return f"repro_gemv<{mb}, {r}, {kt}, {'true' if fp16 else 'false'}>"


def sgemm_name(fp16: bool) -> str:
    return f"repro_sgemm<{'true' if fp16 else 'false'}>"


SGEMM_TILE = 128
SGEMM_THREADS = 256
SGEMM_TOTALS_BYTES = 64 * SGEMM_THREADS * 4  # dynamic shared memory: each thread's 64 running totals

NAMES = [gemv_name(mb, fp16) for mb in GEMV_ROWS for fp16 in (False, True)] + [
    sgemm_name(False),
    sgemm_name(True),
    "repro_combine",
    "repro_rank_sum",
]

_lock = threading.Lock()
_modules: dict[int, dict[str, cuda_rtc.Launcher]] = {}


def module() -> dict[str, cuda_rtc.Launcher]:
    """The kernels compiled for the current device, by name (compiled once per process and device)."""
    dev = torch.cuda.current_device()
    with _lock:
        if dev not in _modules:
            mod = cuda_rtc.compile_module(SOURCE, NAMES, NVRTC_OPTIONS)
            launchers = {}
            for mb in GEMV_ROWS:
                for fp16 in (False, True):
                    name = gemv_name(mb, fp16)
                    cuda_rtc.set_dynamic_smem(mod.functions[name], gemv_smem_bytes(mb))
                    launchers[name] = cuda_rtc.Launcher(mod.functions[name], 14)
            for fp16 in (False, True):
                name = sgemm_name(fp16)
                cuda_rtc.set_dynamic_smem(mod.functions[name], SGEMM_TOTALS_BYTES)
                launchers[name] = cuda_rtc.Launcher(mod.functions[name], 10)
            launchers["repro_combine"] = cuda_rtc.Launcher(mod.functions["repro_combine"], 8)
            launchers["repro_rank_sum"] = cuda_rtc.Launcher(mod.functions["repro_rank_sum"], 4)
            _modules[dev] = launchers
        return _modules[dev]


def ptx() -> str:
    """The module's PTX, compiled with the same options, for audits."""
    return cuda_rtc.compile_ptx(SOURCE, NAMES, NVRTC_OPTIONS)


def gemv_smem_bytes(mb: int) -> int:
    r, kt = gemv_shape(mb)
    return GEMV_STAGES * GEMV_THREADS * r * (kt * 2 + 16) + CHUNK * mb * 4


def gemv_supports(weight: torch.Tensor) -> bool:
    """Rows of 16-bit values at a stride that keeps every row 16-byte aligned."""
    if weight.dtype not in (torch.bfloat16, torch.float16) or weight.stride(-1) != 1:
        return False
    strides = [weight.stride(i) for i in range(weight.dim() - 1) if weight.shape[i] > 1]
    return weight.data_ptr() % 16 == 0 and all(st % 8 == 0 for st in strides)


def gemv(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """fp32 [M, N] for x [M, K] (any float dtype) and weight [N, K] bf16/fp16 (gemv_supports)."""
    return gemv_batched(x[None], weight[None], bias)[0]


def gemv_batched(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """fp32 [B, M, N] for x [B, M, K] and weight [B, N, K]; every entry in the reproducible order."""
    bsz, m, k = x.shape
    n = weight.shape[1]
    if not gemv_supports(weight):
        raise ValueError("the GEMV needs 16-bit weight rows, 16-byte aligned, with strides that are multiples of 8")
    launchers = module()
    dev = x.device
    xf = x if (x.dtype == torch.float32 and x.stride(2) == 1) else x.float().contiguous()
    ldx = xf.stride(1) if m > 1 else k
    x_batch = xf.stride(0) if bsz > 1 else 0
    s = (k + CHUNK - 1) // CHUNK
    mb = next(r for r in GEMV_ROWS if r >= min(m, GEMV_ROWS[-1]))
    mblocks = (m + mb - 1) // mb
    out = torch.empty((bsz, m, n), dtype=torch.float32, device=dev)
    partial = torch.empty((bsz, s, m, n), dtype=torch.float32, device=dev) if s > 1 else out
    b = bias.to(device=dev, dtype=torch.float32).contiguous() if bias is not None else out
    ldw = weight.stride(1) if n > 1 else k
    w_batch = weight.stride(0) if bsz > 1 else 0
    rows = gemv_rows_per_program(mb)
    grid = ((n + rows - 1) // rows, s, bsz * mblocks)
    launchers[gemv_name(mb, weight.dtype == torch.float16)](
        grid, GEMV_THREADS, gemv_smem_bytes(mb),
        xf.data_ptr(), ldx, x_batch, weight.data_ptr(), ldw, w_batch, b.data_ptr(), out.data_ptr(),
        partial.data_ptr(), m, n, k, mblocks, int(bias is not None),
    )  # fmt: skip
    if s > 1:
        combine(partial, bias, out)
    return out


def sgemm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """fp32 [M, N] for x [M, K] and weight [N, K] (16-bit rows, gemv_supports, K % 8 == 0)."""
    m, k = x.shape
    n = weight.shape[0]
    if k % 8 or not gemv_supports(weight):
        raise ValueError("the SGEMM needs K % 8 == 0 and 16-bit weight rows, 16-byte aligned")
    launchers = module()
    dev = x.device
    mp = (m + SGEMM_TILE - 1) // SGEMM_TILE * SGEMM_TILE
    xt = torch.empty((k, mp), dtype=torch.float32, device=dev)  # columns past M are never stored
    xt[:, :m].copy_(x.t())
    out = torch.empty((m, n), dtype=torch.float32, device=dev)
    b = bias.to(device=dev, dtype=torch.float32).contiguous() if bias is not None else out
    grid = (mp // SGEMM_TILE, (n + SGEMM_TILE - 1) // SGEMM_TILE, 1)
    ldw = weight.stride(0) if n > 1 else k
    launchers[sgemm_name(weight.dtype == torch.float16)](
        grid, SGEMM_THREADS, SGEMM_TOTALS_BYTES,
        xt.data_ptr(), mp, weight.data_ptr(), ldw, b.data_ptr(), out.data_ptr(), m, n, k, int(bias is not None),
    )  # fmt: skip
    return out


def combine(partial: torch.Tensor, bias: torch.Tensor | None, out: torch.Tensor) -> None:
    """out[b, m, n] = partial[b, 0] + partial[b, 1] + ... (index order) + bias, NaN canonical."""
    bsz, s, m, n = partial.shape
    b = bias.to(device=out.device, dtype=torch.float32).contiguous() if bias is not None else out
    threads = 256
    blocks = max(1, min((bsz * m * n + threads - 1) // threads, 65535))
    module()["repro_combine"](
        (blocks, 1, 1), threads, 0,
        partial.data_ptr(), b.data_ptr(), out.data_ptr(), bsz, m * n, n, s, int(bias is not None),
    )  # fmt: skip


def rank_sum(ptrs_dev: int, world: int, out: torch.Tensor) -> None:
    """out = buf_0 + buf_1 + ... + buf_{W-1} (fp32, rank order) over symmetric-memory buffers."""
    n = out.numel()
    threads = 256
    blocks = max(1, min((n + threads - 1) // threads, 4096))
    module()["repro_rank_sum"]((blocks, 1, 1), threads, 0, ptrs_dev, world, out.data_ptr(), n)
