"""Where the decode GEMV's short weight streams (4096x4096: 33.5 MB) lose time: kernels that only
read a [N, K] 16-bit weight, back to back, beside the persistent GEMV itself, launched plainly and
as a programmatic dependent. Three ways to read: 16-byte loads from every thread; one producer
thread bulk-copying contiguous pieces into slots that the other threads free through mbarriers;
and the GEMV's own tensor-map boxes (S chunks x G rows x 64 k per stage). Each program's share is
fixed, as the GEMV's is, or handed out as programs ask for it (a counter per call, zeroed in the
graph before the calls). Each figure is printed twice: the median per-call time of graph replays of
24 calls cycling weight copies with the graph's own launch taken off, and, for fixed shares, as
repro_gemm.py and repro_gemv_chain.py time the same calls. bench/NOTES.md has what it found.

    python bench/gemv_balance_probe.py [--quick] [--json PATH]
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
// The share of unit u: [u * unit, min(n16, (u + 1) * unit)) of the weight's 16-byte vectors.
// DYN: program b reads unit b, then the units it takes from *ctr (gridDim.x + ticket); otherwise
// it reads units b, b + gridDim.x, ... in turn. U loads in flight per thread.
template <int U, bool DYN>
__global__ void __launch_bounds__(PT) probe_units(const uint4* __restrict__ w, long long n16, long long unit,
                                                   unsigned* ctr, unsigned* sink) {
  __shared__ long long next_s[2];
  const long long units = (n16 + unit - 1) / unit;
  unsigned acc = 0;
  long long u = blockIdx.x;
  for (int turn = 0; u < units; ++turn) {
    if (threadIdx.x == 0) next_s[turn & 1] = DYN ? gridDim.x + atomicAdd(ctr, 1u) : u + gridDim.x;
    const long long beg = u * unit, end = min(n16, beg + unit);
    for (long long i = beg + threadIdx.x; i < end; i += U * PT) {
      uint4 v[U];
#pragma unroll
      for (int j = 0; j < U; ++j) v[j] = i + j * PT < end ? __ldg(w + i + j * PT) : make_uint4(0, 0, 0, 0);
#pragma unroll
      for (int j = 0; j < U; ++j) acc ^= v[j].x ^ v[j].y ^ v[j].z ^ v[j].w;
    }
    __syncthreads();
    u = next_s[turn & 1];
  }
  if (acc == 0x9e3779b9u) sink[threadIdx.x] = acc;
}

// A computing thread is done with a slot: every thread arrives on its empty barrier, or (WARPS) each
// warp's first lane once the warp has met.
template <bool WARPS>
__device__ __forceinline__ void free_slot(unsigned bar) {
  if (WARPS) {
    __syncwarp();
    if (threadIdx.x % 32 == 0) mbar_arrive(bar);
  } else {
    mbar_arrive(bar);
  }
}

// One producer thread (warp 8) bulk-copies pieces of `piece` bytes into NSLOT slots; the 256
// computing threads read each slot (a word each) and free it. A unit is `per` pieces. DYN as above.
// The producer ends the stream with a slot marked -1.
template <int NSLOT, bool DYN, bool WARPS, bool PDL>
__global__ void __launch_bounds__(PT + 32, 1) probe_bulk(const unsigned char* __restrict__ w, long long bytes,
                                                          int piece, int per, unsigned* ctr, unsigned* sink) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  __shared__ __align__(8) unsigned long long full[NSLOT], empty[NSLOT];
  __shared__ long long slot_piece[NSLOT];
  const unsigned base = (smem_u32(smem_raw) + 127) & ~127u;
  const int tid = threadIdx.x;
  const long long pieces = (bytes + piece - 1) / piece, units = (pieces + per - 1) / per;
  if (tid == 0) {
    for (int i = 0; i < NSLOT; ++i) { mbar_init(smem_u32(&full[i]), 1); mbar_init(smem_u32(&empty[i]), WARPS ? PT / 32 : PT); }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  if (PDL) {  // as the persistent GEMV: the first piece into L2 while the kernel ahead drains
    if (tid == PT && (long long)blockIdx.x * per < pieces)
      asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" :: "l"(w + (long long)blockIdx.x * per * piece),
                   "r"((unsigned)min((long long)piece, bytes - (long long)blockIdx.x * per * piece)) : "memory");
    wait_prior_grids();
  }
  __syncthreads();
  if (tid >= PT) {
    if (tid == PT) {
      long long st = 0, u = blockIdx.x;
      while (u < units) {
        long long next = DYN ? -1 : u + gridDim.x;
        for (int p = 0; p < per; ++p) {
          const long long pc = u * per + p;
          if (pc >= pieces) break;
          const int slot = st % NSLOT;
          if (st >= NSLOT) mbar_wait(smem_u32(&empty[slot]), ((st / NSLOT) - 1) & 1);
          slot_piece[slot] = pc;
          const unsigned nb = (unsigned)min((long long)piece, bytes - pc * piece);
          mbar_arrive_expect(smem_u32(&full[slot]), nb);
          bulk_load(base + slot * piece, w + pc * piece, nb, smem_u32(&full[slot]));
          ++st;
          if (DYN && p == 0) next = gridDim.x + atomicAdd(ctr, 1u);
        }
        u = next;
      }
      if (PDL) allow_dependent_grids();
      const int slot = st % NSLOT;
      if (st >= NSLOT) mbar_wait(smem_u32(&empty[slot]), ((st / NSLOT) - 1) & 1);
      slot_piece[slot] = -1;
      mbar_arrive(smem_u32(&full[slot]));
    }
    return;
  }
  unsigned acc = 0;
  for (long long st = 0;; ++st) {
    const int slot = st % NSLOT;
    mbar_wait(smem_u32(&full[slot]), (st / NSLOT) & 1);
    if (slot_piece[slot] < 0) break;
    unsigned v;
    asm volatile("ld.shared.u32 %0, [%1];" : "=r"(v) : "r"(base + slot * piece + (tid * 4) % piece));
    acc ^= v;
    free_slot<WARPS>(smem_u32(&empty[slot]));
  }
  if (acc == 0x9e3779b9u) sink[tid] = acc;
}

// The persistent GEMV's copies without its arithmetic: its programs, rows, groups and tensor-map
// boxes (S chunks x G rows x 64 k per stage, one 3-D box), NSLOT slots of slot_b bytes.
template <int NSLOT, bool WARPS>
__global__ void __launch_bounds__(PT + 32, 1) probe_box(const __grid_constant__ TensorMap wmap, int N, int K, int G,
                                                         int slot_b, unsigned* sink) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  __shared__ __align__(8) unsigned long long full[NSLOT], empty[NSLOT];
  const unsigned base = (smem_u32(smem_raw) + 1023) & ~1023u;
  const int tid = threadIdx.x, S = K / CHUNK, TPC = CHUNK / 64;
  const int row_begin = (int)((long long)N * blockIdx.x / gridDim.x);
  const int row_end = (int)((long long)N * (blockIdx.x + 1) / gridDim.x);
  const int nstages = (row_end - row_begin + G - 1) / G * TPC;
  if (tid == 0) {
    for (int i = 0; i < NSLOT; ++i) { mbar_init(smem_u32(&full[i]), 1); mbar_init(smem_u32(&empty[i]), WARPS ? PT / 32 : PT); }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  if (tid >= PT) {
    if (tid == PT)
      for (int st = 0; st < nstages; ++st) {
        const int slot = st % NSLOT;
        if (st >= NSLOT) mbar_wait(smem_u32(&empty[slot]), ((st / NSLOT) - 1) & 1);
        mbar_arrive_expect(smem_u32(&full[slot]), S * G * 128);
        tma_load_3d(base + slot * slot_b, &wmap, (st % TPC) * 64, row_begin + (st / TPC) * G, smem_u32(&full[slot]));
      }
    return;
  }
  unsigned acc = 0;
  for (int st = 0; st < nstages; ++st) {
    const int slot = st % NSLOT;
    mbar_wait(smem_u32(&full[slot]), (st / NSLOT) & 1);
    unsigned v;
    asm volatile("ld.shared.u32 %0, [%1];" : "=r"(v) : "r"(base + slot * slot_b + (tid * 4) % slot_b));
    acc ^= v;
    free_slot<WARPS>(smem_u32(&empty[slot]));
  }
  if (acc == 0x9e3779b9u) sink[tid] = acc;
}
"""

SHAPES = [(4096, 4096), (3584, 4608), (4096, 14336), (14336, 4096)]  # K x N (--quick: the first two)
# (loads in flight per thread, programs per SM, unit in KB, dynamic)
UNIT_VARIANTS = [(8, 2, 0, False), (8, 2, 32, True)]
# (slots, piece KB, pieces per unit, dynamic, one arrival per warp, launched as a programmatic
# dependent as the persistent GEMV is); per = 0: the program's whole share as one unit
BULK_VARIANTS = [(6, 32, 0, False, False, False), (6, 32, 0, False, True, False), (6, 32, 2, True, True, False),
                 (12, 16, 0, False, False, False), (12, 16, 0, False, True, False), (24, 8, 0, False, False, False),
                 (24, 8, 0, False, True, False), (5, 32, 0, False, True, False), (48, 4, 0, False, True, False),
                 (5, 32, 0, False, True, True), (6, 32, 0, False, True, True), (4, 32, 0, False, True, True)]  # fmt: skip
# (slots, one arrival per warp): the persistent GEMV's own boxes
BOX_VARIANTS = [(5, False), (5, True), (6, True)]


def graph_us(calls: list, ctr: torch.Tensor) -> float:
    """Median per-call device us of the calls (call i gets counter i) captured in one CUDA graph
    after zeroing the counters; the zeroing's graph, launch included, is taken off."""

    def run_all():
        ctr.zero_()
        for i, c in enumerate(calls):
            c(ctr[i:])

    return (graph_ms([run_all], 1) - graph_ms([ctr.zero_], 1)) * 1e3 / len(calls)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", help="write the figures here")
    parser.add_argument("--quick", action="store_true", help="the two short streams only")
    args = parser.parse_args()
    dev = torch.device("cuda")
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    names = sorted({f"probe_units<{u}, {str(d).lower()}>" for u, _, _, d in UNIT_VARIANTS}
                   | {f"probe_bulk<{s}, {str(d).lower()}, {str(wa).lower()}, {str(pdl).lower()}>" for s, _, _, d, wa, pdl in BULK_VARIANTS}
                   | {f"probe_box<{s}, {str(wa).lower()}>" for s, wa in BOX_VARIANTS})  # fmt: skip
    mod = cuda_rtc.compile_module(ck.SOURCE + PROBES, names, ck.NVRTC_OPTIONS)
    launchers = {}
    for name in names:
        fn = mod.functions[name]
        cuda_rtc.set_dynamic_smem(fn, ck.max_dynamic_smem() - cuda_rtc.static_smem(fn))
        nparams = {"probe_units": 5, "probe_bulk": 6, "probe_box": 6}[name.split("<")[0]]
        structs = {0: cuda_rtc.TENSOR_MAP_BYTES} if name.startswith("probe_box") else None
        launchers[name] = cuda_rtc.Launcher(fn, nparams, structs)
    sink = torch.zeros(256, dtype=torch.int32, device=dev)
    ctr = torch.zeros(64, dtype=torch.int32, device=dev)
    bw = copy_bandwidth()
    print(f"copy bandwidth {bw / 1e12:.2f} TB/s", flush=True)
    rows = []
    for k, n in SHAPES[:2] if args.quick else SHAPES:
        copies = weight_copies(n, k, dev)
        calls_per_graph = 24
        nbytes = n * k * 2
        x = torch.randn(1, k, device=dev).to(torch.bfloat16)
        cases = {}
        for u, per_sm, unit_kb, dyn in UNIT_VARIANTS:
            launch = launchers[f"probe_units<{u}, {str(dyn).lower()}>"]
            grid = sms * per_sm
            unit16 = unit_kb * 64 if unit_kb else -(-nbytes // 16 // grid)
            label = f"loads U={u} x{per_sm} " + (
                f"{'dynamic' if dyn else 'static'} {unit_kb} KB units" if unit_kb else "one share each"
            )
            cases[label] = lambda w, c, launch=launch, grid=grid, unit16=unit16: launch(
                (grid, 1, 1), 256, 0, w.data_ptr(), w.numel() // 8, unit16, c.data_ptr(), sink.data_ptr()
            )
        for slots, piece_kb, per, dyn, warps, pdl in BULK_VARIANTS:
            launch = launchers[f"probe_bulk<{slots}, {str(dyn).lower()}, {str(warps).lower()}, {str(pdl).lower()}>"]
            piece = piece_kb * 1024
            smem = slots * piece + 128
            if smem > ck.max_dynamic_smem() - 1024:
                continue
            pieces = -(-nbytes // piece)
            per_unit = per or -(-pieces // sms)
            label = (
                f"bulk {slots} x {piece_kb} KB "
                + (f"dynamic {per} pieces per unit" if per else "static one share each")
                + (", warp arrivals" if warps else "")
                + (", programmatic" if pdl else "")
            )
            cases[label] = lambda w, c, launch=launch, piece=piece, per_unit=per_unit, smem=smem, pdl=pdl: launch(
                (sms, 1, 1), 288, smem, w.data_ptr(), w.numel() * 2, piece, per_unit, c.data_ptr(), sink.data_ptr(),
                programmatic=pdl,
            )  # fmt: skip
        plan = ck.gemv_persistent_plan(1, n, k, x_dtype=torch.bfloat16)
        slot_b = -(-(k // ck.CHUNK) * plan.group * 128 // 1024) * 1024
        for slots, warps in BOX_VARIANTS:
            launch = launchers[f"probe_box<{slots}, {str(warps).lower()}>"]
            label = f"boxes {slots} x {slot_b // 1024} KB, {plan.programs} programs" + (
                ", warp arrivals" if warps else ""
            )
            cases[label] = lambda w, c, launch=launch, slots=slots, plan=plan, slot_b=slot_b, n=n, k=k: launch(
                (plan.programs, 1, 1), 288, slots * slot_b + 1024,
                ck._weight_tensor_map(w.data_ptr(), n, k, k, plan.group, True), n, k, plan.group, slot_b,
                sink.data_ptr(),
            )  # fmt: skip
        cases["gemv_persistent (the real kernel, programmatic)"] = lambda w, c, x=x: ck.gemv_persistent(x, w, None)

        def plain(w, c, x=x):
            programmatic, ck.PROGRAMMATIC_GEMV = ck.PROGRAMMATIC_GEMV, False
            try:
                ck.gemv_persistent(x, w, None)
            finally:
                ck.PROGRAMMATIC_GEMV = programmatic

        cases["gemv_persistent (the real kernel, plain)"] = plain
        for label, fn in cases.items():
            calls = [lambda c, w=copies[i % len(copies)], fn=fn: fn(w, c) for i in range(calls_per_graph)]
            us = graph_us(calls, ctr)
            share = nbytes / (us * 1e-6) / bw
            # repro_gemm.py's device time (the graph's launch counted in): static shares only, whose
            # counters are never read
            table = None if "dynamic" in label else graph_ms([lambda c=c: c(ctr) for c in calls], len(calls)) * 1e3
            rows.append({"K": k, "N": n, "probe": label, "us": us, "bw_share": share, "table_us": table})
            print(f"K={k:5d} N={n:6d} {label:52s} {us:8.2f} us {100 * share:5.1f}% of copy bw"
                  + (f" | as repro_gemm.py times it {table:6.2f} us {100 * nbytes / (table * 1e-6) / bw:5.1f}%"
                     if table else ""), flush=True)  # fmt: skip
        del copies
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"copy_bw": bw, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
