"""Where the decode GEMV's bandwidth goes: read-only kernels that stream a [N, K] 16-bit weight the
way the persistent GEMV does (one program per SM over its own rows; each stage takes a k slice of
every (row, chunk) pair of a group), with no arithmetic, next to a plain contiguous read and the
real kernel (which copies tensor-map boxes instead). Copy mechanisms: cp.async 16-byte copies
(with and without an L2 prefetch-size hint) and one bulk copy per pair and stage (cp.async.bulk,
completion on an mbarrier; a slot is refilled only once the whole program has moved past it, so
one slot is always idle). bench/NOTES.md has the figures and what they decided.

    python bench/gemv_stream_probe.py [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.repro_gemm import copy_bandwidth, graph_ms, weight_copies  # noqa: E402
from tasks.reproducible import cuda_kernels as ck  # noqa: E402
from tasks.reproducible import cuda_rtc  # noqa: E402

PROBES = r"""
#define PT 256
template <int PF>
__device__ __forceinline__ void cp_async16_hint(unsigned dst, const void* src, int src_bytes) {
  if (PF == 1) asm volatile("cp.async.cg.shared.global.L2::128B [%0], [%1], 16, %2;" :: "r"(dst), "l"(src), "r"(src_bytes) : "memory");
  else if (PF == 2) asm volatile("cp.async.cg.shared.global.L2::256B [%0], [%1], 16, %2;" :: "r"(dst), "l"(src), "r"(src_bytes) : "memory");
  else asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" :: "r"(dst), "l"(src), "r"(src_bytes) : "memory");
}

// Program b reads its own contiguous share of the matrix with 16-byte loads, U in flight per thread.
template <int U>
__global__ void __launch_bounds__(PT) probe_read(const uint4* __restrict__ w, long long n16, unsigned* sink) {
  const long long beg = n16 * blockIdx.x / gridDim.x, end = n16 * (blockIdx.x + 1) / gridDim.x;
  unsigned acc = 0;
  for (long long i = beg + threadIdx.x; i < end; i += U * PT) {
    uint4 v[U];
#pragma unroll
    for (int u = 0; u < U; ++u) v[u] = i + u * PT < end ? __ldg(w + i + u * PT) : make_uint4(0, 0, 0, 0);
#pragma unroll
    for (int u = 0; u < U; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  if (acc == 0x9e3779b9u) sink[threadIdx.x] = acc;
}

// The persistent GEMV's copy schedule, cp.async, no arithmetic: each thread reads one word of its
// pair's piece per stage.
template <int KT, int STAGES, int PF>
__global__ void __launch_bounds__(PT, 1) probe_pairs(const unsigned short* __restrict__ w, int N, int K, int G, unsigned* sink) {
  constexpr int ROW_B = KT * 2, VPT = KT / 8;
  extern __shared__ __align__(16) unsigned char smem[];
  const int S = (K + CHUNK - 1) / CHUNK, P = G * S, tid = threadIdx.x, TPC = CHUNK / KT;
  const int row_begin = (int)((long long)N * blockIdx.x / gridDim.x);
  const int row_end = (int)((long long)N * (blockIdx.x + 1) / gridDim.x);
  const int nstages = (row_end - row_begin + G - 1) / G * TPC;
  auto issue = [&](int st) {
    if (st < nstages) {
      const int n_base = row_begin + (st / TPC) * G, k_off = (st % TPC) * KT;
#pragma unroll
      for (int j = 0; j < VPT; ++j) {
        const int v = tid + j * PT, p = v / VPT, c = v % VPT;
        if (p >= P) continue;
        const int n = n_base + p % G, k = (p / G) * CHUNK + c * 8 + k_off;
        const int bytes = n < row_end ? max(0, min(16, (K - k) * 2)) : 0;
        cp_async16_hint<PF>(smem_u32(smem + (st % STAGES) * PT * ROW_B + p * ROW_B + c * 16), bytes ? w + (size_t)n * K + k : w, bytes);
      }
    }
    cp_commit();
  };
  for (int st = 0; st < STAGES - 1; ++st) issue(st);
  unsigned acc = 0;
  for (int st = 0; st < nstages; ++st) {
    cp_wait<STAGES - 2>();
    __syncthreads();
    issue(st + STAGES - 1);
    acc ^= *reinterpret_cast<const unsigned*>(smem + (st % STAGES) * PT * ROW_B + tid * ROW_B);
  }
  cp_wait<0>();
  if (acc == 0x9e3779b9u) sink[tid] = acc;
}

// mbar_init, mbar_arrive_expect and mbar_wait come from kernels.cu (compiled ahead of this).
__device__ __forceinline__ void bulk_copy(unsigned dst, const void* src, unsigned bytes, unsigned bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
               :: "r"(dst), "l"(src), "r"(bytes), "r"(bar) : "memory");
}

// The same schedule with one bulk copy per pair and stage (pieces padded by 16 bytes). K must be a
// multiple of KT. Thread 0 announces each stage's bytes; the copies complete on the stage's barrier.
template <int KT, int STAGES>
__global__ void __launch_bounds__(PT, 1) probe_pairs_bulk(const unsigned short* __restrict__ w, int N, int K, int G, unsigned* sink) {
  constexpr int ROW_B = KT * 2 + 16;
  extern __shared__ __align__(16) unsigned char smem[];
  __shared__ __align__(8) unsigned long long bars[STAGES];
  const int S = (K + CHUNK - 1) / CHUNK, P = G * S, tid = threadIdx.x, TPC = CHUNK / KT;
  const int row_begin = (int)((long long)N * blockIdx.x / gridDim.x);
  const int row_end = (int)((long long)N * (blockIdx.x + 1) / gridDim.x);
  const int nstages = (row_end - row_begin + G - 1) / G * TPC;
  if (tid == 0) {
    for (int s = 0; s < STAGES; ++s) mbar_init(smem_u32(&bars[s]), 1);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  auto issue = [&](int st) {
    if (st >= nstages) return;
    const int n_base = row_begin + (st / TPC) * G, k_off = (st % TPC) * KT;
    const unsigned bar = smem_u32(&bars[st % STAGES]);
    if (tid == 0) {
      const int rows = min(G, row_end - n_base);
      int bytes = 0;
      for (int s = 0; s < S; ++s) bytes += max(0, min(KT, K - s * CHUNK - k_off)) * 2 * rows;
      mbar_arrive_expect(bar, bytes);
    }
    if (tid < P) {
      const int n = n_base + tid % G, k = (tid / G) * CHUNK + k_off;
      const int bytes = n < row_end ? max(0, min(KT, K - k)) * 2 : 0;
      if (bytes) bulk_copy(smem_u32(smem + (st % STAGES) * PT * ROW_B + tid * ROW_B), w + (size_t)n * K + k, bytes, bar);
    }
  };
  for (int st = 0; st < STAGES - 1; ++st) issue(st);
  unsigned acc = 0;
  for (int st = 0; st < nstages; ++st) {
    mbar_wait(smem_u32(&bars[st % STAGES]), (st / STAGES) & 1);
    acc ^= *reinterpret_cast<const unsigned*>(smem + (st % STAGES) * PT * ROW_B + tid * ROW_B);
    __syncthreads();  // every thread is done with the slot issue() refills
    issue(st + STAGES - 1);
  }
  if (acc == 0x9e3779b9u) sink[tid] = acc;
}
"""

PAIR_VARIANTS = [(64, 4, 0), (64, 4, 2), (64, 4, 1), (128, 3, 0), (128, 3, 2), (32, 8, 0), (64, 6, 0)]
BULK_VARIANTS = [(64, 4), (64, 6), (128, 3), (32, 8), (256, 2)]
READ_VARIANTS = [(4, 1), (8, 1), (8, 2), (16, 1)]  # (loads in flight per thread, programs per SM)
SHAPES = [(4096, 14336), (14336, 4096), (4096, 4096), (4096, 128256)]  # K x N


def module(names: list[str]) -> cuda_rtc.CompiledModule:
    return cuda_rtc.compile_module(ck.SOURCE + PROBES, names, ck.NVRTC_OPTIONS)


def shape_calls(launchers: dict, n: int, k: int, sms: int, sink: torch.Tensor) -> dict:
    """label -> weight -> None: every probe and the real kernel at one shape."""
    smem_max = ck.max_dynamic_smem()
    group = ck.persistent_group(n, k, sms)
    x = torch.randn(1, k, device=sink.device).to(torch.bfloat16)
    tail = (n, k, group, sink.data_ptr())
    calls = {}
    for u, per_sm in READ_VARIANTS:
        launch = launchers[f"probe_read<{u}>"]
        calls[f"read U={u} x{per_sm}"] = lambda w, launch=launch, p=per_sm: launch(
            (sms * p, 1, 1), 256, 0, w.data_ptr(), w.numel() // 8, sink.data_ptr()
        )
    for kt, st, pf in PAIR_VARIANTS:
        smem, launch = st * 256 * kt * 2, launchers[f"probe_pairs<{kt}, {st}, {pf}>"]
        if smem <= smem_max:
            calls[f"pairs cp.async ({kt},{st}) L2 hint {[0, 128, 256][pf]}"] = lambda w, launch=launch, s=smem: launch(
                (sms, 1, 1), 256, s, w.data_ptr(), *tail
            )
    for kt, st in BULK_VARIANTS:
        smem, launch = st * 256 * (kt * 2 + 16), launchers[f"probe_pairs_bulk<{kt}, {st}>"]
        if smem <= smem_max - 1024 and k % kt == 0:
            calls[f"pairs bulk ({kt},{st})"] = lambda w, launch=launch, s=smem: launch(
                (sms, 1, 1), 256, s, w.data_ptr(), *tail
            )
    calls["gemv_persistent (the real kernel)"] = lambda w: ck.gemv_persistent(x, w, None)
    return calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", help="write the figures here")
    args = parser.parse_args()
    dev = torch.device("cuda")
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    names = (sorted({f"probe_read<{u}>" for u, _ in READ_VARIANTS}) + [f"probe_pairs<{a}, {b}, {c}>" for a, b, c in PAIR_VARIANTS]
             + [f"probe_pairs_bulk<{a}, {b}>" for a, b in BULK_VARIANTS])  # fmt: skip
    mod = module(names)
    launchers = {}
    for name in names:
        fn = mod.functions[name]
        cuda_rtc.set_dynamic_smem(fn, ck.max_dynamic_smem() - cuda_rtc.static_smem(fn))
        launchers[name] = cuda_rtc.Launcher(fn, 3 if name.startswith("probe_read") else 5)
    sink = torch.zeros(256, dtype=torch.int32, device=dev)
    bw = copy_bandwidth()
    print(f"copy bandwidth {bw / 1e12:.2f} TB/s", flush=True)
    rows = []
    for k, n in SHAPES:
        copies = weight_copies(n, k, dev)
        reps = max(3, min(24, int(30e3 / (n * k * 2 / bw * 1e6))))
        for label, fn in shape_calls(launchers, n, k, sms, sink).items():
            ms = graph_ms([lambda w=w, fn=fn: fn(w) for w in copies], reps)
            share = n * k * 2 / (ms * 1e-3) / bw
            rows.append({"K": k, "N": n, "probe": label, "us": ms * 1e3, "bw_share": share})
            print(f"K={k:5d} N={n:6d} {label:44s} {ms * 1e3:8.1f} us {100 * share:5.1f}% of copy bw", flush=True)
        del copies
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"copy_bw": bw, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
