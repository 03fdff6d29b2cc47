// The reproducible path's CUDA kernels (cuda_kernels.py describes them). cuda_kernels.py defines
// CHUNK (config.py's chunk length), ROWS (the row-block GEMV's threads), GP_XS and GP_XSH (the
// persistent GEMV's padded chunk of x, in fp32 and in 16-bit values), GP_IN_FLIGHT (its weight
// stages requested at once) and the warp-specialized SGEMM's WS_* before this source and compiles
// it with NVRTC: -fmad=false -ftz=false -prec-div=true -prec-sqrt=true.

#define CANONICAL_NAN 0x7fc00000

// Compiled for the device's own architecture: kernels that need a newer one keep their signature
// and trap, and cuda_kernels.py never launches them there (cp.async needs sm_80, the
// tensor-memory accelerator and its mbarriers sm_90). Everything else runs on any GPU.
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
#define REPRO_SM80 1
#endif
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
#define REPRO_SM90 1
#endif
// REPRO_SM90A: defined by cuda_kernels.py for the build of the kernels that need sm_90a's
// architecture-specific instructions (setmaxnreg), which it compiles for sm_90a alone.

__device__ __forceinline__ unsigned smem_u32(const void* p) {
  unsigned r;
  asm volatile("{ .reg .u64 a; cvta.to.shared.u64 a, %1; cvt.u32.u64 %0, a; }" : "=r"(r) : "l"(p));
  return r;
}
#ifdef REPRO_SM80
__device__ __forceinline__ void cp_async16(unsigned dst, const void* src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" :: "r"(dst), "l"(src), "r"(src_bytes) : "memory");
}
__device__ __forceinline__ void cp_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_wait() { asm volatile("cp.async.wait_group %0;" :: "n"(N) : "memory"); }
#endif
#ifdef REPRO_SM90
// Programmatic dependent launch. A kernel launched as one may start before the kernel ahead of it
// in the stream has finished: wait_prior_grids() returns once that kernel has completed and its
// memory is visible, so nothing the kernel ahead writes or reads may be touched before it (an L2
// prefetch may: every access of the GPU meets in L2, so a prefetched line cannot go stale).
// Without such a launch the wait returns at once. allow_dependent_grids() lets the next such
// launch start as this program's resources free up.
__device__ __forceinline__ void wait_prior_grids() { asm volatile("griddepcontrol.wait;" ::: "memory"); }
__device__ __forceinline__ void allow_dependent_grids() { asm volatile("griddepcontrol.launch_dependents;" ::: "memory"); }
#endif
// The first thing a kernel launched as a programmatic dependent on sm_90 does when it reads and
// writes nothing before the kernel ahead ends: wait for it, then let the next such launch start
// (its programs take free room and wait in turn), which hides the launch gap between the two.
__device__ __forceinline__ void programmatic_start() {
#ifdef REPRO_SM90
  wait_prior_grids();
  allow_dependent_grids();
#endif
}

__device__ __forceinline__ float lo16(unsigned v, bool fp16) {
  if (fp16) { float f; unsigned short h = (unsigned short)(v & 0xffffu); asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f; }
  return __uint_as_float(v << 16);
}
__device__ __forceinline__ float hi16(unsigned v, bool fp16) {
  if (fp16) { float f; unsigned short h = (unsigned short)(v >> 16); asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f; }
  return __uint_as_float(v & 0xffff0000u);
}
__device__ __forceinline__ float canonical(float y) { return y != y ? __uint_as_float(CANONICAL_NAN) : y; }
// Four consecutive outputs of a row, columns n..n+3 of N, at o: one 16-byte store when they fit
// and `vec` (o is 16-byte aligned), else one at a time up to N.
__device__ __forceinline__ void store_row4(float* o, const float v[4], int n, int N, bool vec) {
  if (vec && n + 3 < N) {
    *reinterpret_cast<float4*>(o) = make_float4(v[0], v[1], v[2], v[3]);
  } else {
#pragma unroll
    for (int j = 0; j < 4; ++j)
      if (n + j < N) o[j] = v[j];
  }
}
// Element i of a float32 (dtype 0), bfloat16 (1) or float16 (2) array, exactly as fp32.
__device__ __forceinline__ float load_as_f32(const void* p, long long i, int dtype) {
  if (dtype == 0) return reinterpret_cast<const float*>(p)[i];
  const unsigned h = reinterpret_cast<const unsigned short*>(p)[i];
  return dtype == 1 ? __uint_as_float(h << 16) : lo16(h, true);
}
// Whether M rows of x, `size`-byte elements at a stride of ldx from a first row at x, all start
// on a 16-byte boundary (one row needs no stride): load8_as_f32's `vec` for them.
__device__ __forceinline__ bool rows_16b_aligned(const void* x, long long ldx, int size, int M) {
  return reinterpret_cast<size_t>(x) % 16 == 0 && (M == 1 || ldx * size % 16 == 0);
}
// Elements i..i+7 of a float32/bfloat16/float16 array as fp32 into v, the first `valid` of them
// (-0.0 past them): 16-byte loads when `vec` (array and i 16-byte aligned) and all eight are valid.
__device__ __forceinline__ void load8_as_f32(const void* p, long long i, int dtype, bool vec, int valid, float v[8]) {
  if (vec && valid >= 8) {
    if (dtype == 0) {
      const float4 a = *reinterpret_cast<const float4*>(reinterpret_cast<const float*>(p) + i);
      const float4 b = *reinterpret_cast<const float4*>(reinterpret_cast<const float*>(p) + i + 4);
      v[0] = a.x; v[1] = a.y; v[2] = a.z; v[3] = a.w; v[4] = b.x; v[5] = b.y; v[6] = b.z; v[7] = b.w;
    } else {
      const uint4 q = *reinterpret_cast<const uint4*>(reinterpret_cast<const unsigned short*>(p) + i);
      const unsigned words[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        v[2 * e] = lo16(words[e], dtype == 2);
        v[2 * e + 1] = hi16(words[e], dtype == 2);
      }
    }
    return;
  }
#pragma unroll
  for (int e = 0; e < 8; ++e) v[e] = e < valid ? load_as_f32(p, i + e, dtype) : -0.0f;
}
// Elements i..i+7 of a 16-bit array as they are, two to a word, the first `valid` of them (-0.0,
// 0x8000 in bf16 and fp16 alike, past them): one 16-byte load when `vec` and all eight are valid.
__device__ __forceinline__ uint4 load8_16bit(const void* p, long long i, bool vec, int valid) {
  const unsigned short* h = reinterpret_cast<const unsigned short*>(p) + i;
  if (vec && valid >= 8) return *reinterpret_cast<const uint4*>(h);
  unsigned w[4];
#pragma unroll
  for (int e = 0; e < 4; ++e)
    w[e] = (2 * e < valid ? h[2 * e] : 0x8000u) | (2 * e + 1 < valid ? h[2 * e + 1] : 0x8000u) << 16;
  return make_uint4(w[0], w[1], w[2], w[3]);
}

// The SGEMMs' outputs i * 8 + h * 4 .. + 3 of a thread's fragment, columns n..n+3 of N: its running
// totals (totals[output * stride + tid]) plus the bias, NaN made canonical.
__device__ __forceinline__ void totals_plus_bias(const float* totals, int stride, int tid, int i, int h,
                                                 const void* bias, int bias_dtype, int n, int N, float v[4]) {
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    float y = totals[(i * 8 + h * 4 + j) * stride + tid];
    if (bias && n + j < N) y = __fadd_rn(y, load_as_f32(bias, n + j, bias_dtype));
    v[j] = canonical(y);
  }
}

// Batched: entry b reads x + b*x_batch (MB rows at stride ldx, in elements of the dtype x_dtype
// names: fp32, bf16 or fp16), rows of w + b*w_batch at stride ldw (a multiple of 8, 16-byte
// aligned), and writes out + b*M*N ([M, N]) or its partials partial + b*S*M*N ([S, M, N]).
// blockIdx.z = b * mblocks + (row block of MB rows of x).
// Each thread owns R weight rows (tid + j*ROWS): every x value read from shared memory feeds R*MB
// chains, which keeps the 8- and 16-row kernels from being bound by shared-memory broadcasts.
template <int MB, int R, int KT, int STAGES, bool FP16>
__global__ void __launch_bounds__(ROWS) repro_gemv(
    const void* __restrict__ x, int x_dtype, long long ldx, long long x_batch, const unsigned short* __restrict__ w,
    long long ldw, long long w_batch, const void* __restrict__ bias, int bias_dtype, float* __restrict__ out,
    float* __restrict__ partial, int M, int N, int K, int mblocks) {
#ifdef REPRO_SM80
  constexpr int ROW_B = KT * 2 + 16;  // 16 bytes of padding keep 16-byte row reads conflict-free
  constexpr int ROWS_CTA = ROWS * R;
  programmatic_start();
  extern __shared__ __align__(16) unsigned char smem[];
  unsigned char* ws = smem;
  float* xs = reinterpret_cast<float*>(smem + STAGES * ROWS_CTA * ROW_B);  // [MB][CHUNK]
  const int tid = threadIdx.x;
  const int n0 = blockIdx.x * ROWS_CTA;
  const int s = blockIdx.y;
  const int S = gridDim.y;
  const int b = blockIdx.z / mblocks;
  const int m0 = (blockIdx.z % mblocks) * MB;
  const int x_bytes = x_dtype ? 2 : 4;
  x = reinterpret_cast<const unsigned char*>(x) + (size_t)b * x_batch * x_bytes;
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

  // x chunk, row-major xs[m][k], read in its own dtype eight values at a time. Padding (k past the
  // chunk, rows past M) is -0.0: times a zero-filled weight it gives -0.0, which added to any
  // accumulator leaves it unchanged.
  const bool x_vec = rows_16b_aligned(x, ldx, x_bytes, M);
  for (int u = tid; u < MB * CHUNK / 8; u += ROWS) {
    const int m = u / (CHUNK / 8), k = u % (CHUNK / 8) * 8;
    float v[8];
    load8_as_f32(x, (long long)(m0 + m) * ldx + kbeg + k, x_dtype, x_vec, m0 + m < M ? min(8, klen - k) : 0, v);
    *reinterpret_cast<float4*>(xs + m * CHUNK + k) = make_float4(v[0], v[1], v[2], v[3]);
    *reinterpret_cast<float4*>(xs + m * CHUNK + k + 4) = make_float4(v[4], v[5], v[6], v[7]);
  }

  float acc[R][MB];
#pragma unroll
  for (int j = 0; j < R; ++j)
#pragma unroll
    for (int m = 0; m < MB; ++m) acc[j][m] = 0.0f;

  for (int st = 0; st < nstages; ++st) {
    cp_wait<STAGES - 2>();
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
      const float bn = bias ? load_as_f32(bias, n, bias_dtype) : 0.0f;
#pragma unroll
      for (int m = 0; m < MB; ++m) {
        if (m0 + m < M) {
          float y = acc[j][m];
          if (bias) y = __fadd_rn(y, bn);
          out[(size_t)(m0 + m) * N + n] = canonical(y);
        }
      }
    } else {
#pragma unroll
      for (int m = 0; m < MB; ++m)
        if (m0 + m < M) partial[((size_t)s * M + (m0 + m)) * N + n] = acc[j][m];
    }
  }
#else
  __trap();
#endif
}

// mbarrier and tensor-copy (TMA, sm_90) helpers for the persistent GEMV.
struct alignas(64) TensorMap { unsigned long long opaque[16]; };  // a CUtensorMap, encoded on the host
#ifdef REPRO_SM90
__device__ __forceinline__ void mbar_init(unsigned bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_arrive(unsigned bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" :: "r"(bar) : "memory");
}
__device__ __forceinline__ void mbar_arrive_expect(unsigned bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_wait(unsigned bar, unsigned parity) {
  unsigned done = 0;
  while (!done)
    asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
                 : "=r"(done) : "r"(bar), "r"(parity) : "memory");
}
// The box at (k0, n0) of a 2-D tensor map, or (k0, n0, 0) of a 3-D one, into shared memory at dst,
// completing on the mbarrier bar.
__device__ __forceinline__ void tma_load_2d(unsigned dst, const TensorMap* map, int k0, int n0, unsigned bar) {
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];"
               :: "r"(dst), "l"(reinterpret_cast<unsigned long long>(map)), "r"(k0), "r"(n0), "r"(bar) : "memory");
}
__device__ __forceinline__ void tma_load_3d(unsigned dst, const TensorMap* map, int k0, int n0, unsigned bar) {
  asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], [%5];"
               :: "r"(dst), "l"(reinterpret_cast<unsigned long long>(map)), "r"(k0), "r"(n0), "r"(0), "r"(bar) : "memory");
}
// `bytes` (a multiple of 16) from global src to shared dst, both 16-byte aligned, completing on bar.
__device__ __forceinline__ void bulk_load(unsigned dst, const void* src, unsigned bytes, unsigned bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
               :: "r"(dst), "l"(src), "r"(bytes), "r"(bar) : "memory");
}
// The same boxes fetched into L2 only: a hint, which reads no data into the program.
__device__ __forceinline__ void tma_prefetch_2d(const TensorMap* map, int k0, int n0) {
  asm volatile("cp.async.bulk.prefetch.tensor.2d.L2.global.tile [%0, {%1, %2}];"
               :: "l"(reinterpret_cast<unsigned long long>(map)), "r"(k0), "r"(n0) : "memory");
}
__device__ __forceinline__ void tma_prefetch_3d(const TensorMap* map, int k0, int n0) {
  asm volatile("cp.async.bulk.prefetch.tensor.3d.L2.global.tile [%0, {%1, %2, %3}];"
               :: "l"(reinterpret_cast<unsigned long long>(map)), "r"(k0), "r"(n0), "r"(0) : "memory");
}
#endif

// Decode GEMV for up to MB (1, 2, 4) rows of x, one persistent program per SM: the weight's rows
// are split evenly over the programs, and each program walks its rows in groups of G <= 256 / S
// rows (S chunks of K). Thread t < 256 owns the pair (row t % G, chunk t / G) of the current group
// and runs its MB fp32 FMA chains over that chunk's k in order; at the group's end the S chunk
// partials of each row are added in index order by one thread, then the bias: the order of
// config.py, in one launch, with no partial buffer. x, read once in its own dtype, is kept as fp32
// in shared memory, -0.0 past K. The computing threads load it themselves (GP_XU units of 8 k per
// thread per round trip); with XCOPY (chosen where that takes two or more round trips: 3 us at
// K = 14336, which left the weight stream stalled as long), where x's rows are 16-byte aligned and
// fit the weight slots but one, the producer copies them first instead, into the last slots, and
// the computing threads upcast them from there while the first weights arrive. Two instantiations
// because the copy's code, even untaken, slowed the other case by 5% (Qwen qkv at M = 1).
// With XH (x's dtype code: 1 bf16, 2 fp16), x stays in shared memory as its 16-bit values, half
// the room, and is upcast as it is read: for long rows of 16-bit x whose fp32 copy leaves no room
// for two weight slots (Llama's down projection at M = 3 and 4, Qwen's at 2). Its rows are copied
// straight into place by the producer, a chunk at a time, where they are 16-byte aligned and
// K % 8 == 0, and loaded by the computing threads where not.
// Weights: a stage is the next 64 k of every chunk of the group, which one producer thread (warp 8)
// copies with the tensor-memory accelerator into one of `stages` slots as 128-byte rows, swizzled
// so that eight rows' 16-byte reads hit eight bank groups: S boxes of G rows (row r of box s is
// pair (r, s)), or, when `merged` (K a multiple of CHUNK, the map viewing the weight as
// [S][N][CHUNK]), one box of S x G rows (row s * G + r). Each slot has a "full"
// mbarrier (the copies' bytes) and an "empty" one (every computing thread has read it). Past K and
// past N the copies fill zeros: +0.0 times x's -0.0 adds -0.0, which changes no sum.
#define GP_THREADS 256
#define GP_MAX_STAGES 8
#define GP_KT 64
#define GP_XU 4
template <int MB, bool FP16, bool XCOPY, int XH>
__global__ void __launch_bounds__(GP_THREADS + 32, 1) repro_gemv_persistent(
    const __grid_constant__ TensorMap wmap, int merged, int stages, int prefetch, int early, const void* __restrict__ x, int x_dtype, long long ldx,
    const void* __restrict__ bias, int bias_dtype, float* __restrict__ out, int M, int N, int K, int G) {
#ifdef REPRO_SM90
  constexpr int TPC = CHUNK / GP_KT;    // stages per chunk
  constexpr int XS = GP_XS;             // x floats per chunk, padded to stagger the chunks' banks
  constexpr int XSH = GP_XSH;           // with XH, x's 16-bit values per chunk, staggered alike
  extern __shared__ __align__(16) unsigned char smem_raw[];
  __shared__ __align__(8) unsigned long long full[GP_MAX_STAGES], empty[GP_MAX_STAGES], x_full, x_empty;
  const int S = (K + CHUNK - 1) / CHUNK;
  const int P = G * S;                  // (row, chunk) pairs in a group, <= GP_THREADS
  const int box_b = (G * 128 + 1023) / 1024 * 1024;  // swizzled boxes start 1024-byte aligned
  const int slot_b = merged ? (P * 128 + 1023) / 1024 * 1024 : S * box_b;
  const int box_rows = merged ? G : box_b / 128;  // slot rows from one chunk's box to the next
  const unsigned ws = (smem_u32(smem_raw) + 1023) & ~1023u;                  // [stages][slot_b]
  float* xs = reinterpret_cast<float*>(smem_raw + (ws - smem_u32(smem_raw)) + stages * slot_b);  // [MB][S][XS]
  unsigned short* xh = reinterpret_cast<unsigned short*>(xs);                  // with XH: [MB][S][XSH]
  float* red = XH ? reinterpret_cast<float*>(xh + MB * S * XSH) : xs + MB * S * XS;  // [2][MB][S][G]
  const int tid = threadIdx.x;
  const int row_begin = (int)((long long)N * blockIdx.x / gridDim.x);
  const int row_end = (int)((long long)N * (blockIdx.x + 1) / gridDim.x);
  const int nstages = (row_end - row_begin + G - 1) / G * TPC;
  const int x_size = x_dtype ? 2 : 4;
  const long long x_row_bytes = (long long)K * x_size;
  const bool x_bulk = XCOPY && rows_16b_aligned(x, ldx, x_size, M) && x_row_bytes % 16 == 0 &&
                      M * x_row_bytes <= (long long)(stages - 1) * slot_b;
  const int x_slots = x_bulk ? (int)((M * x_row_bytes + slot_b - 1) / slot_b) : 0;
  const unsigned x_raw = ws + (stages - x_slots) * slot_b;  // [M][K] in x's dtype, when x_bulk
  const bool x_direct = XH && rows_16b_aligned(x, ldx, 2, M) && K % 8 == 0;  // XH: copied into place

  if (tid == 0) {
    for (int i = 0; i < stages; ++i) {
      mbar_init(smem_u32(&full[i]), 1);
      mbar_init(smem_u32(&empty[i]), GP_THREADS);
    }
    if (XCOPY || XH) {
      mbar_init(smem_u32(&x_full), 1);
      mbar_init(smem_u32(&x_empty), GP_THREADS);
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  // The weight boxes of stage st (the next 64 k of every chunk of its group's rows): copied into
  // the slot at `dst`, completing on `bar`, or (`to_slot` false) only fetched into L2.
  auto stage_boxes = [&](int st, bool to_slot, unsigned dst, unsigned bar) {
    const int n0 = row_begin + (st / TPC) * G, k_off = (st % TPC) * GP_KT;
    if (merged) {
      if (to_slot) tma_load_3d(dst, &wmap, k_off, n0, bar);
      else tma_prefetch_3d(&wmap, k_off, n0);
    } else {
      for (int c = 0; c < S; ++c) {
        if (to_slot) tma_load_2d(dst + c * box_b, &wmap, c * CHUNK + k_off, n0, bar);
        else tma_prefetch_2d(&wmap, c * CHUNK + k_off, n0);
      }
    }
  };
  // Stage st copied into `slot`, its bytes expected on the slot's "full" mbarrier.
  auto copy_stage = [&](int st, int slot) {
    const unsigned bar = smem_u32(&full[slot]);
    mbar_arrive_expect(bar, S * G * 128);
    stage_boxes(st, true, ws + slot * slot_b, bar);
  };
  // Launched as a programmatic dependent (cuda_kernels.py), the program may start while the kernel
  // ahead finishes. Meanwhile it copies its first `early` stages of weights into their slots, where
  // the caller vouches that the kernel ahead does not write the weight (frozen inference weights),
  // or else fetches the first `prefetch` stages into L2; x, every other copy and every store wait
  // for that kernel.
  early = max(0, min(early, min(nstages, stages - x_slots)));
  if (early > 0) {
    __syncthreads();  // the mbarriers are initialised
    if (tid == GP_THREADS)
      for (int st = 0; st < early; ++st) copy_stage(st, st);  // early <= stages
  } else if (tid == GP_THREADS) {
    for (int st = 0; st < min(prefetch, nstages); ++st) stage_boxes(st, false, 0, 0);
  }
  wait_prior_grids();
  __syncthreads();

  if (tid >= GP_THREADS) {  // the producer warp: one thread issues every copy
    if (tid == GP_THREADS) {
      if (x_bulk) {
        mbar_arrive_expect(smem_u32(&x_full), (unsigned)(M * x_row_bytes));
        for (int m = 0; m < M; ++m)
          bulk_load(x_raw + m * x_row_bytes, static_cast<const char*>(x) + m * ldx * x_size, (unsigned)x_row_bytes,
                    smem_u32(&x_full));
      }
      if (x_direct) {
        mbar_arrive_expect(smem_u32(&x_full), (unsigned)(M * x_row_bytes));
        for (int m = 0; m < M; ++m)
          for (int c = 0; c < S; ++c)
            bulk_load(smem_u32(xh + (m * S + c) * XSH), static_cast<const unsigned short*>(x) + m * ldx + c * CHUNK,
                      (unsigned)(min(CHUNK, K - c * CHUNK) * 2), smem_u32(&x_full));
      }
      for (int st = early; st < nstages; ++st) {
        const int slot = st % stages, round = st / stages;
        if (round) mbar_wait(smem_u32(&empty[slot]), (round - 1) & 1);
        else if (x_bulk && slot >= stages - x_slots) mbar_wait(smem_u32(&x_empty), 0);  // x is still there
        // At most GP_IN_FLIGHT stages requested and not yet in (cuda_kernels.py says why). Never more
        // than the slots: the wait below would then meet a slot already refilled, whose parity
        // names a later phase, and never return.
        if (st >= GP_IN_FLIGHT) {
          const int done = st - GP_IN_FLIGHT;
          mbar_wait(smem_u32(&full[done % stages]), (done / stages) & 1);
        }
        copy_stage(st, slot);
      }
      allow_dependent_grids();  // every copy is issued: the next GEMV may take this SM as it frees
    }
    return;
  }

  // x into shared memory, eight k per unit: upcast from the producer's copy (x_bulk), or loaded
  // here as fp32, or (XH) as its 16-bit values; -0.0 past K and in rows past M. Loaded here, each
  // thread issues the loads of GP_XU units before it stores any, so that x costs one round trip to
  // L2 per GP_XU units, not one per value; with x_direct the producer copies x's rows into place
  // and only the units past them are stored here.
  const int units = MB * S * (CHUNK / 8);
  const bool x_vec = rows_16b_aligned(x, ldx, x_size, M);
  if (x_bulk) {  // from the producer's copy
    mbar_wait(smem_u32(&x_full), 0);
    for (int u = tid; u < units; u += GP_THREADS) {
      const int m = u / (S * CHUNK / 8), k = u % (S * CHUNK / 8) * 8;
      const int valid = m < M ? K - k : 0;  // a multiple of 8 for 16-bit x, of 4 for fp32
      const unsigned src = x_raw + (unsigned)((m * x_row_bytes + (long long)k * x_size));
      unsigned q[8];
#pragma unroll
      for (int e = 0; e < 8; ++e) q[e] = 0x80000000u;  // -0.0
      if (valid > 0 && x_size == 2) {
        asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(q[0]), "=r"(q[2]), "=r"(q[4]), "=r"(q[6]) : "r"(src));
#pragma unroll
        for (int e = 0; e < 8; e += 2) {
          q[e + 1] = __float_as_uint(hi16(q[e], x_dtype == 2));
          q[e] = __float_as_uint(lo16(q[e], x_dtype == 2));
        }
      } else if (valid > 0) {
        asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(q[0]), "=r"(q[1]), "=r"(q[2]), "=r"(q[3]) : "r"(src));
        if (valid > 4)
          asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(q[4]), "=r"(q[5]), "=r"(q[6]), "=r"(q[7]) : "r"(src + 16));
      }
      float* dst = xs + m * S * XS + (k / CHUNK) * XS + k % CHUNK;
      *reinterpret_cast<uint4*>(dst) = make_uint4(q[0], q[1], q[2], q[3]);
      *reinterpret_cast<uint4*>(dst + 4) = make_uint4(q[4], q[5], q[6], q[7]);
    }
    mbar_arrive(smem_u32(&x_empty));
  }
  for (int base = 0; base < (x_bulk ? 0 : units); base += GP_XU * GP_THREADS) {
    uint4 h[XH ? GP_XU : 1];
    float v[XH ? 1 : GP_XU][8];
#pragma unroll
    for (int j = 0; j < GP_XU; ++j) {
      const int u = base + tid + j * GP_THREADS, m = u / (S * CHUNK / 8), k = u % (S * CHUNK / 8) * 8;
      const int valid = u < units && m < M ? K - k : 0;
      if constexpr (XH != 0) h[j] = load8_16bit(x, (long long)m * ldx + k, x_vec, x_direct ? 0 : valid);
      else load8_as_f32(x, (long long)m * ldx + k, x_dtype, x_vec, valid, v[j]);
    }
#pragma unroll
    for (int j = 0; j < GP_XU; ++j) {
      const int u = base + tid + j * GP_THREADS, m = u / (S * CHUNK / 8), k = u % (S * CHUNK / 8) * 8;
      if (u >= units) break;
      if constexpr (XH != 0) {
        if (x_direct && m < M && k < K) continue;  // the copy's (K % 8 == 0: a unit is wholly before K or past it)
        *reinterpret_cast<uint4*>(xh + (m * S + k / CHUNK) * XSH + k % CHUNK) = h[j];
      } else {
        float* dst = xs + m * S * XS + (k / CHUNK) * XS + k % CHUNK;
        *reinterpret_cast<float4*>(dst) = make_float4(v[j][0], v[j][1], v[j][2], v[j][3]);
        *reinterpret_cast<float4*>(dst + 4) = make_float4(v[j][4], v[j][5], v[j][6], v[j][7]);
      }
    }
  }
  if (XH && x_direct) mbar_wait(smem_u32(&x_full), 0);
  asm volatile("bar.sync 1, %0;" :: "n"(GP_THREADS) : "memory");  // the computing threads only

  // Neighbouring threads own neighbouring rows of a slot (conflict-free reads) and mostly one
  // chunk (x read as a broadcast).
  const int r = tid % G, s = tid / G;
  const bool computes = tid < P;
  const float* xmine = xs + s * XS;
  const unsigned short* xhmine = xh + s * XSH;
  // x[m][k..k+3] of this thread's chunk, k = off from the chunk's start, as fp32.
  auto x4 = [&](int m, int off) -> float4 {
    if constexpr (XH != 0) {
      const uint2 h = *reinterpret_cast<const uint2*>(xhmine + m * S * XSH + off);
      return make_float4(lo16(h.x, XH == 2), hi16(h.x, XH == 2), lo16(h.y, XH == 2), hi16(h.y, XH == 2));
    } else {
      return *reinterpret_cast<const float4*>(xmine + m * S * XS + off);
    }
  };
  const int slot_row = s * box_rows + r;
  const int row_off = slot_row * 128, swz = slot_row & 7;
  float acc[MB];
#pragma unroll
  for (int m = 0; m < MB; ++m) acc[m] = 0.0f;

  for (int st = 0; st < nstages; ++st) {
    const int slot = st % stages, t = st % TPC;
    mbar_wait(smem_u32(&full[slot]), (st / stages) & 1);
    if (computes) {
      const unsigned piece = ws + slot * slot_b + row_off;
#pragma unroll
      for (int c = 0; c < GP_KT / 8; ++c) {
        unsigned q0, q1, q2, q3;
        asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(q0), "=r"(q1), "=r"(q2), "=r"(q3) : "r"(piece + ((c ^ swz) << 4)));
        const unsigned words[4] = {q0, q1, q2, q3};
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          const float w0 = lo16(words[half * 2], FP16), w1 = hi16(words[half * 2], FP16);
          const float w2 = lo16(words[half * 2 + 1], FP16), w3 = hi16(words[half * 2 + 1], FP16);
#pragma unroll
          for (int m = 0; m < MB; ++m) {
            const float4 xv = x4(m, t * GP_KT + c * 8 + half * 4);
            acc[m] = __fmaf_rn(xv.x, w0, acc[m]);
            acc[m] = __fmaf_rn(xv.y, w1, acc[m]);
            acc[m] = __fmaf_rn(xv.z, w2, acc[m]);
            acc[m] = __fmaf_rn(xv.w, w3, acc[m]);
          }
        }
      }
    }
    mbar_arrive(smem_u32(&empty[slot]));
    if (t == TPC - 1) {  // the group's chunks are done: add them in index order
      // Two buffers: a group's partials are written while the previous group's may still be read.
      float* gred = red + ((st / TPC) & 1) * MB * S * G;
      if (computes) {
#pragma unroll
        for (int m = 0; m < MB; ++m) {
          gred[(m * S + s) * G + r] = acc[m];
          acc[m] = 0.0f;
        }
      }
      asm volatile("bar.sync 1, %0;" :: "n"(GP_THREADS) : "memory");
      // One thread per (row of x, weight row); the unrolled loop issues its loads ahead of the adds.
      for (int i = tid; i < M * G; i += GP_THREADS) {
        const int m = i / G, gr = i % G, n = row_begin + (st / TPC) * G + gr;
        if (n >= row_end) continue;
        const float* p = gred + m * S * G + gr;
        float y = p[0];
#pragma unroll 8
        for (int c = 1; c < S; ++c) y = __fadd_rn(y, p[c * G]);
        if (bias) y = __fadd_rn(y, load_as_f32(bias, n, bias_dtype));
        out[(size_t)m * N + n] = canonical(y);
      }
    }
  }
#else
  __trap();
#endif
}

// Prefill: a 128 x 128 output tile per program, 16384 / (TM * 8) threads, each TM x 8 outputs held
// in registers as (TM / 4) x 2 quads: lanes 4 x 8, warps WM x 2 of 4*TM x 64 outputs, so a warp's
// fragment reads touch 64 + 128 bytes of shared memory per k. TM = 8 (256 threads) or 16 (128
// threads, twice the FMAs per shared-memory read, fewer warps). x tiles ([BK, 128] of the k-major
// fp32 copy, xt [K, ldx]) go straight to shared memory through an NS-stage cp.async pipeline;
// weight tiles ([N, K] 16-bit) are copied one tile ahead by cp.async and upcast into a
// double-buffered fp32 tile by the thread that copied them. Each output is one __fmaf_rn chain
// per chunk over k in order. Program (x, y) takes the output tile at rows 128 x, columns
// 128 (ntile0 + y). Without SPLIT a program walks every chunk and adds each chain into the
// thread's running total (shared memory) at the chunk's end; with SPLIT, program (x, y, z)
// computes chunk z alone and writes it as 128 x 128 values at partial + (z * gridDim.x *
// gridDim.y + y * gridDim.x + x) * 16384 for repro_combine_tiles (more programs where whole tiles
// would leave SMs idle: a small output, or the last wave of a large one). Past the chunk's end x
// is zero-filled and the weight is -0.0, so padded products are -0.0 (neutral).
template <int TM, int BK, int NS, int MINB, bool SPLIT, bool FP16>
__global__ void __launch_bounds__(16384 / (TM * 8), MINB) repro_sgemm(
    const float* __restrict__ xt, long long ldx, const unsigned short* __restrict__ w, long long ldw,
    const void* __restrict__ bias, int bias_dtype, float* __restrict__ out, float* __restrict__ partial,
    int M, int N, int K, int ntile0) {
#ifdef REPRO_SM80
  constexpr int THREADS = 16384 / (TM * 8);
  constexpr int WM = 128 / (4 * TM);             // warps along m
  constexpr int BV = BK * 16;                    // 16-byte weight vectors per tile
  constexpr int BVT = (BV + THREADS - 1) / THREADS;  // per thread
  static_assert(BK * 32 % THREADS == 0, "x tile copies must divide evenly over the threads");
  static_assert(NS >= 3, "tile it + 1's x stage must be older than the newest one");
  extern __shared__ __align__(16) float sm[];
  float* As = sm;                                // [NS][BK][128]
  float* Bs = As + NS * BK * 128;                // [2][BK][128]
  unsigned short* Braw = reinterpret_cast<unsigned short*>(Bs + 2 * BK * 128);  // [BV][8], 16-bit as loaded
  float* totals = reinterpret_cast<float*>(Braw + BV * 8);  // [TM * 8][THREADS], without SPLIT
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int am = (warp % WM) * 4 * TM + (lane / 8) * 4;  // rows am + q*16 + i
  const int bnn = (warp / WM) * 64 + (lane % 8) * 4;     // columns bnn + q*32 + j
  const int m0 = blockIdx.x * 128, n0 = (ntile0 + blockIdx.y) * 128;
  const int kbeg = SPLIT ? blockIdx.z * CHUNK : 0;
  const int klen = (SPLIT ? min(K, kbeg + CHUNK) : K) - kbeg;
  const int ntiles = (klen + BK - 1) / BK;

  // The copies are issued tile after tile in order, so each thread keeps running source pointers
  // and stage indices instead of recomputing 64-bit addresses per tile (that arithmetic was about a
  // tenth of the loop's instructions). x vector j of a tile: k row ak + j * AROWS, columns
  // ac * 4.. of the tile; past the chunk's end it is zero-filled (source size 0).
  constexpr int AROWS = THREADS / 32, AV = BK * 32 / THREADS;
  const int ak = tid / 32, ac = tid % 32;
  const float* a_src = xt + (size_t)(kbeg + ak) * ldx + m0 + ac * 4;
  const size_t a_step = (size_t)AROWS * ldx;
  const unsigned a_dst = smem_u32(As + ak * 128 + ac * 4);
  int a_k = 0, a_stage = 0;  // the next x tile to copy: its first k (from kbeg) and its stage
  auto issue_a = [&]() {
    if (a_k < klen) {
#pragma unroll
      for (int j = 0; j < AV; ++j) {
        const bool in = a_k + ak + j * AROWS < klen;
        cp_async16(a_dst + (a_stage * BK * 128 + j * AROWS * 128) * 4, in ? a_src + j * a_step : xt, in ? 16 : 0);
      }
      a_src += (size_t)BK * ldx;
      a_k += BK;
      a_stage = a_stage + 1 == NS ? 0 : a_stage + 1;
    }
    cp_commit();
  };
  // Weight vector v = tid + j * THREADS of a tile: row v / (BK / 8), k offset (tid % (BK / 8)) * 8,
  // so neighbouring threads copy neighbouring 16 bytes of a row. Each thread copies its vectors
  // into its own slots of Braw and later upcasts them itself: no barrier between the copy and the
  // upcast, and no registers held across the tile's FMAs for a load the compiler would otherwise
  // sink behind them.
  const int bk8 = (tid % (BK / 8)) * 8;
  const unsigned short* b_src[BVT];
#pragma unroll
  for (int j = 0; j < BVT; ++j)
    b_src[j] = w + (size_t)min(n0 + (tid + j * THREADS) / (BK / 8), N - 1) * ldw + kbeg + bk8;
  const unsigned b_dst = smem_u32(Braw + tid * 8);
  int b_k = 0;  // the next weight tile to copy: its first k (from kbeg)
  auto issue_b = [&]() {
    if (b_k < klen) {
      const bool in = b_k + bk8 < klen;
#pragma unroll
      for (int j = 0; j < BVT; ++j) {
        if (tid + j * THREADS >= BV) break;
        cp_async16(b_dst + j * THREADS * 16, in ? b_src[j] + b_k : w, in ? 16 : 0);
      }
      b_k += BK;
    }
    cp_commit();
  };
  // Upcast tile it's weights into B buffer (it & 1), k-major. Past the chunk's end (K % 8 == 0, so
  // a vector is wholly inside or wholly past it) the copy left zeros; those become -0.0 here.
  auto convert_b = [&](int it) {
    const bool in = it * BK + bk8 < klen;
#pragma unroll
    for (int j = 0; j < BVT; ++j) {
      const int v = tid + j * THREADS;
      if (v >= BV) break;
      float* dst = Bs + (it & 1) * BK * 128 + bk8 * 128 + v / (BK / 8);
      const uint4 q = *reinterpret_cast<const uint4*>(Braw + v * 8);
      const unsigned words[4] = {in ? q.x : 0x80008000u, in ? q.y : 0x80008000u, in ? q.z : 0x80008000u,
                                 in ? q.w : 0x80008000u};
#pragma unroll
      for (int e = 0; e < 8; ++e) dst[e * 128] = (e & 1) ? hi16(words[e >> 1], FP16) : lo16(words[e >> 1], FP16);
    }
  };

  float acc[TM][8];
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int j = 0; j < 8; ++j) acc[i][j] = 0.0f;
  if (!SPLIT)
    for (int i = 0; i < TM * 8; ++i) totals[i * THREADS + tid] = -0.0f;

#pragma unroll
  for (int st = 0; st < NS - 1; ++st) issue_a();
  issue_b();
  cp_wait<0>();
  convert_b(0);
  __syncthreads();
  int r_stage = 0;  // x stage of tile it
  for (int it = 0; it < ntiles; ++it) {
    issue_b();  // tile it + 1
    issue_a();  // tile it + NS - 1: the stage it overwrites was last read in iteration it - 1
    const float* A = As + r_stage * BK * 128;
    r_stage = r_stage + 1 == NS ? 0 : r_stage + 1;
    const float* B = Bs + (it & 1) * BK * 128;
#pragma unroll
    for (int k = 0; k < BK; ++k) {
      float a[TM];
#pragma unroll
      for (int q = 0; q < TM / 4; ++q) {
        const float4 aq = *reinterpret_cast<const float4*>(A + k * 128 + am + q * 16);
        a[q * 4] = aq.x; a[q * 4 + 1] = aq.y; a[q * 4 + 2] = aq.z; a[q * 4 + 3] = aq.w;
      }
      const float4 b0 = *reinterpret_cast<const float4*>(B + k * 128 + bnn);
      const float4 b1 = *reinterpret_cast<const float4*>(B + k * 128 + bnn + 32);
      const float b[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
      // Column by column over the fragment, down one column and up the next, so that consecutive
      // FMAs share an operand: the compiled code stalls less on register operands this way (2-3%
      // faster than row by row at M = 4096, the turns 0.1-0.6% more); every chain still runs over
      // k in order.
#pragma unroll
      for (int j = 0; j < 8; ++j)
#pragma unroll
        for (int ii = 0; ii < TM; ++ii) {
          const int i = (j & 1) ? TM - 1 - ii : ii;
          acc[i][j] = __fmaf_rn(a[i], b[j], acc[i][j]);
        }
    }
    cp_wait<1>();  // all but the newest x stage: tile it + 1's weights and x are in
    if (it + 1 < ntiles) convert_b(it + 1);
    __syncthreads();
    if (!SPLIT && ((it + 1) % (CHUNK / BK) == 0 || it + 1 == ntiles)) {
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          float* t = &totals[(i * 8 + j) * THREADS + tid];
          *t = __fadd_rn(*t, acc[i][j]);
          acc[i][j] = 0.0f;
        }
    }
  }
  cp_wait<0>();

  // With SPLIT, this chunk's chains go to its partial tile, whole (what lies past M or N is never
  // combined); otherwise the running totals, plus the bias, to the output.
  float* ptile = partial + (((size_t)blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x) * 16384;
#pragma unroll
  for (int i = 0; i < TM; ++i) {
    const int r = am + (i >> 2) * 16 + (i & 3), m = m0 + r;
    if (!SPLIT && m >= M) continue;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int c = bnn + h * 32, n = n0 + c;
      float v[4];
      if (SPLIT) {
#pragma unroll
        for (int j = 0; j < 4; ++j) v[j] = acc[i][h * 4 + j];
      } else {
        totals_plus_bias(totals, THREADS, tid, i, h, bias, bias_dtype, n, N, v);
      }
      if (SPLIT)
        *reinterpret_cast<float4*>(ptile + r * 128 + c) = make_float4(v[0], v[1], v[2], v[3]);
      else
        store_row4(out + (size_t)m * N + n, v, n, N, (N & 3) == 0);  // n is a multiple of 4
    }
  }
#else
  __trap();
#endif
}

// Prefill on sm_90a where it pays (cuda_kernels.py says where): 256 x 128 output tiles, one
// program per SM, warp-specialized. Four warpgroups compute (16 warps; 8 x 8 outputs per thread in
// repro_sgemm's layout with TM = 8, twice as many rows: the same chains, FMA order and running
// totals in shared memory). One loader warpgroup: its first thread copies each stage's x tile
// ([WS_BK, 256] of the k-major fp32 copy) and weight tile ([128, WS_BK] 16-bit, 32-byte swizzled)
// with the tensor-memory accelerator; its last two warps upcast the weight into a k-major fp32 tile
// (-0.0 past K; x past K arrives as +0.0 and past M as whatever feeds outputs never stored). Each
// stage slot has three mbarriers: "loaded" (the copies' bytes), "full" (the upcast) and "empty"
// (every computing thread has read it), so no barrier spans the program in the main loop, and the
// copies run up to WS_STAGES - 1 stages ahead. The loader gives its registers (setmaxnreg, hence
// sm_90a) to the computing threads, which hold 64 chains in WS_COMPUTE_REGS without spilling.
// cuda_kernels.py defines WS_ROWS, WS_BK, WS_STAGES, WS_COMPUTE (computing threads), and
// WS_COMPUTE_REGS and WS_LOADER_REGS.
template <bool FP16>
__global__ void __launch_bounds__(WS_COMPUTE + 128, 1) repro_sgemm_ws(
    const __grid_constant__ TensorMap xmap, const __grid_constant__ TensorMap wmap, const void* __restrict__ bias,
    int bias_dtype, float* __restrict__ out, int M, int N, int K) {
#ifdef REPRO_SM90A
  static_assert(WS_ROWS == 256 && WS_COMPUTE == 512 && WS_BK == 16 && CHUNK % WS_BK == 0,
                "the fragment layout takes 16 computing warps over 256 rows, the upcast two 8-k vectors per row");
  extern __shared__ __align__(16) unsigned char smem_raw[];
  // Swizzled copies need their slots aligned to the swizzle's 1024-byte repeat.
  const unsigned base = (smem_u32(smem_raw) + 1023) & ~1023u;
  unsigned char* raw = smem_raw + (base - smem_u32(smem_raw));       // [WS_STAGES][128][WS_BK] 16-bit
  float* As = reinterpret_cast<float*>(raw + WS_STAGES * 128 * WS_BK * 2);  // [WS_STAGES][WS_BK][WS_ROWS]
  float* Bs = As + WS_STAGES * WS_BK * WS_ROWS;                              // [WS_STAGES][WS_BK][128]
  float* totals = Bs + WS_STAGES * WS_BK * 128;                              // [64][WS_COMPUTE]
  __shared__ __align__(8) unsigned long long loaded[WS_STAGES], full[WS_STAGES], empty[WS_STAGES];
  const int tid = threadIdx.x;
  const int m0 = blockIdx.x * WS_ROWS, n0 = blockIdx.y * 128;
  const int ntiles = (K + WS_BK - 1) / WS_BK;
  constexpr int UPCASTERS = 64;  // the loader's last two warps: rows u and u + 64
  if (tid == 0) {
    for (int i = 0; i < WS_STAGES; ++i) {
      mbar_init(smem_u32(&loaded[i]), 1);
      mbar_init(smem_u32(&full[i]), UPCASTERS);
      mbar_init(smem_u32(&empty[i]), WS_COMPUTE);
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();

  if (tid >= WS_COMPUTE) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" :: "n"(WS_LOADER_REGS));
    if (tid == WS_COMPUTE) {  // the copies, each into a slot every computing thread has left
      for (int it = 0, slot = 0, round = 0; it < ntiles; ++it) {
        if (round) mbar_wait(smem_u32(&empty[slot]), (round - 1) & 1);
        const unsigned bar = smem_u32(&loaded[slot]);
        mbar_arrive_expect(bar, WS_BK * (WS_ROWS * 4 + 128 * 2));
        tma_load_2d(smem_u32(As + slot * WS_BK * WS_ROWS), &xmap, m0, it * WS_BK, bar);
        tma_load_2d(smem_u32(raw + slot * 128 * WS_BK * 2), &wmap, it * WS_BK, n0, bar);
        if (++slot == WS_STAGES) { slot = 0; ++round; }
      }
    }
    if (tid < WS_COMPUTE + 128 - UPCASTERS) return;
    const int u = tid - (WS_COMPUTE + 128 - UPCASTERS);
    for (int it = 0, slot = 0, round = 0; it < ntiles; ++it) {
      mbar_wait(smem_u32(&loaded[slot]), round & 1);
      if (round) mbar_wait(smem_u32(&empty[slot]), (round - 1) & 1);
      const bool whole = (it + 1) * WS_BK <= K;
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int row = u + 64 * r;
        // 32-byte swizzle: the row's two 16-byte halves trade places on rows 4..7 of every 8.
        const unsigned char* src = raw + slot * 128 * WS_BK * 2 + row * WS_BK * 2;
        float* dst = Bs + slot * WS_BK * 128 + row;
#pragma unroll
        for (int v = 0; v < 2; ++v) {
          const uint4 q = *reinterpret_cast<const uint4*>(src + (v ^ ((row >> 2) & 1)) * 16);
          const bool in = whole || it * WS_BK + v * 8 < K;  // K % 8 == 0: a vector is wholly in or past K
          const unsigned words[4] = {in ? q.x : 0x80008000u, in ? q.y : 0x80008000u, in ? q.z : 0x80008000u,
                                     in ? q.w : 0x80008000u};
#pragma unroll
          for (int e = 0; e < 8; ++e)
            dst[(v * 8 + e) * 128] = (e & 1) ? hi16(words[e >> 1], FP16) : lo16(words[e >> 1], FP16);
        }
      }
      mbar_arrive(smem_u32(&full[slot]));
      if (++slot == WS_STAGES) { slot = 0; ++round; }
    }
    return;
  }

  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" :: "n"(WS_COMPUTE_REGS));
  const int lane = tid % 32, warp = tid / 32;
  const int am = (warp % 8) * 32 + (lane / 8) * 4;   // rows am + q*16 + i
  const int bnn = (warp / 8) * 64 + (lane % 8) * 4;  // columns bnn + q*32 + j
  float acc[8][8];
#pragma unroll
  for (int i = 0; i < 8; ++i)
#pragma unroll
    for (int j = 0; j < 8; ++j) acc[i][j] = 0.0f;
  for (int i = 0; i < 64; ++i) totals[i * WS_COMPUTE + tid] = -0.0f;
  for (int it = 0, slot = 0, phase = 0; it < ntiles; ++it) {
    mbar_wait(smem_u32(&loaded[slot]), phase);  // the copied x tile (the weight's upcast follows it)
    mbar_wait(smem_u32(&full[slot]), phase);
    const float* A = As + slot * WS_BK * WS_ROWS;
    const float* B = Bs + slot * WS_BK * 128;
    // Fragments read through one helper into alternating arrays: the same loads, which the
    // compiler schedules better this way (bench/NOTES.md).
    float a[2][8], b[2][8];
    auto fragments = [&](int k, float* av, float* bv) {
#pragma unroll
      for (int q = 0; q < 2; ++q) {
        const float4 aq = *reinterpret_cast<const float4*>(A + k * WS_ROWS + am + q * 16);
        av[q * 4] = aq.x; av[q * 4 + 1] = aq.y; av[q * 4 + 2] = aq.z; av[q * 4 + 3] = aq.w;
      }
      const float4 b0 = *reinterpret_cast<const float4*>(B + k * 128 + bnn);
      const float4 b1 = *reinterpret_cast<const float4*>(B + k * 128 + bnn + 32);
      bv[0] = b0.x; bv[1] = b0.y; bv[2] = b0.z; bv[3] = b0.w; bv[4] = b1.x; bv[5] = b1.y; bv[6] = b1.z; bv[7] = b1.w;
    };
#pragma unroll
    for (int k = 0; k < WS_BK; ++k) {
      fragments(k, a[k & 1], b[k & 1]);
      // repro_sgemm's order over the fragment: down one column and up the next.
#pragma unroll
      for (int j = 0; j < 8; ++j)
#pragma unroll
        for (int ii = 0; ii < 8; ++ii) {
          const int i = (j & 1) ? 7 - ii : ii;
          acc[i][j] = __fmaf_rn(a[k & 1][i], b[k & 1][j], acc[i][j]);
        }
    }
    mbar_arrive(smem_u32(&empty[slot]));
    if (++slot == WS_STAGES) { slot = 0; phase ^= 1; }
    if ((it + 1) % (CHUNK / WS_BK) == 0 || it + 1 == ntiles) {
#pragma unroll
      for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          float* t = &totals[(i * 8 + j) * WS_COMPUTE + tid];
          *t = __fadd_rn(*t, acc[i][j]);
          acc[i][j] = 0.0f;
        }
    }
  }
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const int r = am + (i >> 2) * 16 + (i & 3), m = m0 + r;
    if (m >= M) continue;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int c = bnn + h * 32, n = n0 + c;
      float v[4];
      totals_plus_bias(totals, WS_COMPUTE, tid, i, h, bias, bias_dtype, n, N, v);
      store_row4(out + (size_t)m * N + n, v, n, N, (N & 3) == 0);  // n is a multiple of 4
    }
  }
#else
  __trap();
#endif
}

// x [M, K] (fp32, bf16 or fp16 rows at stride ldx) -> xt [K, ldt] fp32 (ldt a multiple of 4), the
// SGEMM's k-major copy (exact): 64 x 64 blocks through shared memory, read as eight k of a row per
// thread (16-byte loads where x's rows allow) and written as four m of a k row (16-byte stores),
// so that enough bytes are in flight: one value per load ran at under half the copy bandwidth.
extern "C" __global__ void __launch_bounds__(256) repro_transpose(const void* __restrict__ x, int dtype, long long ldx,
                                                                  float* __restrict__ xt, long long ldt, int M, int K) {
  __shared__ float block[64][65];  // [k][m]; the odd row length spreads both passes over the banks
  const int k0 = blockIdx.x * 64, m0 = blockIdx.y * 64, tid = threadIdx.x;
  const bool x_vec = rows_16b_aligned(x, ldx, dtype ? 2 : 4, M);
  float v[2][8];
#pragma unroll
  for (int j = 0; j < 2; ++j) {  // units of eight k: row u / 8, k (u % 8) * 8; both loads issued first
    const int u = tid + j * 256, i = u / 8, kv = u % 8 * 8;
    load8_as_f32(x, (long long)(m0 + i) * ldx + k0 + kv, dtype, x_vec, m0 + i < M ? min(8, K - k0 - kv) : 0, v[j]);
  }
#pragma unroll
  for (int j = 0; j < 2; ++j) {
    const int u = tid + j * 256, i = u / 8, kv = u % 8 * 8;
#pragma unroll
    for (int e = 0; e < 8; ++e) block[kv + e][i] = v[j][e];
  }
  __syncthreads();
#pragma unroll
  for (int j = 0; j < 4; ++j) {  // quads of m: k row q / 16, m (q % 16) * 4
    const int q = tid + j * 256, kk = q / 16, mq = q % 16 * 4, m = m0 + mq;
    if (k0 + kk >= K) continue;
    const float v[4] = {block[kk][mq], block[kk][mq + 1], block[kk][mq + 2], block[kk][mq + 3]};
    store_row4(xt + (long long)(k0 + kk) * ldt + m, v, m, M, true);  // ldt and m are multiples of 4
  }
}

// partial [B, S, MN] -> out [B, MN]: chunk partials added in index order, then the bias.
extern "C" __global__ void repro_combine(const float* __restrict__ partial, const void* __restrict__ bias, int bias_dtype,
                                         float* __restrict__ out, int B, long long MN, int N, int S) {
  programmatic_start();
  const long long total = (long long)B * MN;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total; i += (long long)gridDim.x * blockDim.x) {
    const long long b = i / MN, r = i - b * MN;
    const float* p = partial + b * S * MN + r;
    float y = p[0];
    for (int s = 1; s < S; ++s) y = __fadd_rn(y, p[(long long)s * MN]);
    if (bias) y = __fadd_rn(y, load_as_f32(bias, r % N, bias_dtype));
    out[i] = canonical(y);
  }
}

// The SGEMM's split tiles: partial [S][ntiles][128 x 128] (tile t of the launch is the output tile
// at rows 128 (t % mtiles), columns 128 (ntile0 + t / mtiles)) -> out [M, N]: chunk partials in
// index order, then the bias.
extern "C" __global__ void repro_combine_tiles(const float* __restrict__ partial, const void* __restrict__ bias,
                                               int bias_dtype, float* __restrict__ out, int M, int N, int mtiles,
                                               int ntile0, int ntiles, int S) {
  const long long total = (long long)ntiles * 16384;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total; i += (long long)gridDim.x * blockDim.x) {
    const int t = (int)(i >> 14), r = (int)(i >> 7) & 127, c = (int)i & 127;
    const int m = t % mtiles * 128 + r, n = (ntile0 + t / mtiles) * 128 + c;
    if (m >= M || n >= N) continue;
    float y = partial[i];
    for (int s = 1; s < S; ++s) y = __fadd_rn(y, partial[(long long)s * total + i]);
    if (bias) y = __fadd_rn(y, load_as_f32(bias, n, bias_dtype));
    out[(size_t)m * N + n] = canonical(y);
  }
}

// The deterministic all-reduce in one launch, over each rank's symmetric buffer: [2][half] fp32
// data, then ready[AR_MAX_BLOCKS][world] and calls[AR_MAX_BLOCKS] (u64, zeroed when made). Block b
// counts its calls (the epoch), copies slice b of this rank's partial into the half the epoch's
// parity picks, tells every rank (ready[b][rank] = epoch in the peer's buffer), waits until every
// rank has done the same, and adds slice b of all ranks' halves in rank order 0..W-1. The two
// halves take turns, so no second barrier is needed: a rank writes a half again only two calls
// later, after a wait that each peer passes only once it has finished the call that read it
// (calls on one buffer follow each other on a stream). The epoch lives on the device, so a CUDA
// graph replays correctly. A wait that outlasts AR_TIMEOUT_NS (a rank died) traps instead of
// hanging: ten minutes, as long as the process group's watchdog waits by default, so that a slow
// peer is not taken for a dead one.
#define AR_MAX_BLOCKS 256
#define AR_TIMEOUT_NS 600000000000ull
__device__ __forceinline__ unsigned long long ld_acquire_sys(const unsigned long long* p) {
  unsigned long long v;
  asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void st_release_sys(unsigned long long* p, unsigned long long v) {
  asm volatile("st.release.sys.global.u64 [%0], %1;" :: "l"(p), "l"(v) : "memory");
}
__device__ __forceinline__ unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

extern "C" __global__ void __launch_bounds__(256) repro_all_reduce(
    const float* __restrict__ in, int in_vec, const unsigned long long* __restrict__ ptrs, int world, int rank,
    float* __restrict__ out, long long n, long long half) {
  const int b = blockIdx.x, tid = threadIdx.x;
  auto flags = [&](int r) {
    return reinterpret_cast<unsigned long long*>(reinterpret_cast<float*>(ptrs[r]) + 2 * half);
  };
  __shared__ unsigned long long epoch_s;
  if (tid == 0) {
    unsigned long long* calls = flags(rank) + AR_MAX_BLOCKS * world + b;
    epoch_s = *calls + 1;
    *calls = epoch_s;
  }
  __syncthreads();
  const unsigned long long epoch = epoch_s;
  const long long per = ((n + gridDim.x - 1) / gridDim.x + 3) / 4 * 4;  // 16-byte aligned slices
  const long long lo = min(n, b * per), hi = min(n, lo + per), vhi = in_vec ? lo + (hi - lo) / 4 * 4 : lo;
  const long long off = (long long)(epoch & 1) * half;
  float* mine = reinterpret_cast<float*>(ptrs[rank]) + off;
  auto rank_half = [&](int r) { return reinterpret_cast<const float*>(ptrs[r]) + off; };
  for (long long i = lo + tid * 4; i < vhi; i += 4 * blockDim.x)
    *reinterpret_cast<float4*>(mine + i) = *reinterpret_cast<const float4*>(in + i);
  for (long long i = vhi + tid; i < hi; i += blockDim.x) mine[i] = in[i];
  __syncthreads();
  if (tid < world) {
    __threadfence_system();
    st_release_sys(flags(tid) + b * world + rank, epoch);
    const unsigned long long* ready = flags(rank) + b * world + tid;
    const unsigned long long t0 = global_ns();
    while (ld_acquire_sys(ready) < epoch)
      if (global_ns() - t0 > AR_TIMEOUT_NS) __trap();
  }
  __syncthreads();
  // Four vectors per thread per pass, each rank's four loads issued together: the reads of peers'
  // memory are long round trips.
  const long long ohi = lo + (hi - lo) / 4 * 4;  // the halves and out are 16-byte aligned
  const long long step = 4LL * blockDim.x;
  for (long long i0 = lo + tid * 4; i0 < ohi; i0 += 4 * step) {
    float4 y[4], v[4];
#pragma unroll
    for (int u = 0; u < 4; ++u)
      if (i0 + u * step < ohi) y[u] = __ldcv(reinterpret_cast<const float4*>(rank_half(0) + i0 + u * step));
    for (int r = 1; r < world; ++r) {
      const float* peer = rank_half(r);
#pragma unroll
      for (int u = 0; u < 4; ++u)
        if (i0 + u * step < ohi) v[u] = __ldcv(reinterpret_cast<const float4*>(peer + i0 + u * step));
#pragma unroll
      for (int u = 0; u < 4; ++u)
        y[u] = make_float4(__fadd_rn(y[u].x, v[u].x), __fadd_rn(y[u].y, v[u].y), __fadd_rn(y[u].z, v[u].z),
                           __fadd_rn(y[u].w, v[u].w));
    }
#pragma unroll
    for (int u = 0; u < 4; ++u)
      if (i0 + u * step < ohi)
        *reinterpret_cast<float4*>(out + i0 + u * step) =
            make_float4(canonical(y[u].x), canonical(y[u].y), canonical(y[u].z), canonical(y[u].w));
  }
  for (long long i = ohi + tid; i < hi; i += blockDim.x) {
    float y = __ldcv(rank_half(0) + i);
    for (int r = 1; r < world; ++r) y = __fadd_rn(y, __ldcv(rank_half(r) + i));
    out[i] = canonical(y);
  }
}
