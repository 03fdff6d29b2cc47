// The CPU reference's FMA chains (cpu_native.py builds this with the system C compiler): the same
// chunk partials as cpu_reference.chain_partials, with the C library's fmaf, which rounds once.
// No fast-math: every multiply-add is an explicit fmaf, nothing is reassociated.
#include <math.h>
#include <stdint.h>
#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#endif

// Work items (b, s, block of NB columns) item_begin..item_end of
//   out[b][s][m][n] = fmaf chain from +0.0 over k in chunk s (k = s * L + kk, kk < L, k < K) of
//                     x[b][m][k] * w[b][n][k],
// with x [B][M][K] and w [B][N][K] fp32, row-major. The emulation pads the last chunk with
// fma(-0.0, +0.0, acc), which leaves every acc unchanged (signed zeros and NaN included), so the
// chains here simply stop at K. Each item first copies its block of the weight k-major into
// `scratch` (L * NB floats, L2-sized), so the inner loop runs along n, vectorized.
void repro_chain_partials(const float* x, const float* w, float* out, int64_t B, int64_t S, int64_t M, int64_t L,
                          int64_t N, int64_t K, int64_t NB, int64_t item_begin, int64_t item_end, float* scratch) {
  // Subnormals stay IEEE whatever mode the calling thread was left in (flush-to-zero, denormals-are-zero).
#if defined(__x86_64__) || defined(__i386__)
  const unsigned csr = _mm_getcsr();
  _mm_setcsr(csr & ~0x8040u);
#elif defined(__aarch64__)
  uint64_t fpcr;
  __asm__ volatile("mrs %0, fpcr" : "=r"(fpcr));
  __asm__ volatile("msr fpcr, %0" ::"r"(fpcr & ~(UINT64_C(1) << 24)));
#endif
  const int64_t blocks = (N + NB - 1) / NB;
  for (int64_t item = item_begin; item < item_end; ++item) {
    const int64_t b = item / (S * blocks), s = item / blocks % S, n0 = item % blocks * NB;
    const int64_t nb = n0 + NB < N ? NB : N - n0, k0 = s * L, kl = k0 + L < K ? L : K - k0;
    for (int64_t j = 0; j < nb; ++j) {
      const float* wrow = w + (b * N + n0 + j) * K + k0;
      for (int64_t kk = 0; kk < kl; ++kk) scratch[kk * nb + j] = wrow[kk];
    }
    for (int64_t m = 0; m < M; ++m) {
      float* restrict acc = out + ((b * S + s) * M + m) * N + n0;
      const float* xm = x + (b * M + m) * K + k0;
      for (int64_t j = 0; j < nb; ++j) acc[j] = 0.0f;
      for (int64_t kk = 0; kk < kl; ++kk) {
        const float xv = xm[kk];
        const float* restrict wk = scratch + kk * nb;
        for (int64_t j = 0; j < nb; ++j) acc[j] = fmaf(xv, wk[j], acc[j]);
      }
    }
  }
#if defined(__x86_64__) || defined(__i386__)
  _mm_setcsr(csr);
#elif defined(__aarch64__)
  __asm__ volatile("msr fpcr, %0" ::"r"(fpcr));
#endif
}
