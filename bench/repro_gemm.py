"""Reproducible GEMM benchmark on one GPU: bitwise check against the CPU emulation at every
shape, then side by side in one run: cuBLAS bf16 (tensor cores: the speed ceiling, not
reproducible), fp32-resident SGEMM (TF32 off), LayerCast-style (bf16 weights cast to fp32 on every
call, then SGEMM), and ours (tasks.reproducible). The copy bandwidth (device-to-device copy, bytes
read plus written) is measured in the same run.

Two times per method: "call", the median of three triton.testing.do_bench medians taken in
rounds that interleave the methods (L2 flushed before every call; includes whatever host launch
overhead the GPU waits for; the rounds keep a passing stall of the host from landing on one method
alone), and "device", the median per-call time of CUDA-graph replays of many calls that cycle
through enough weight copies to miss in L2 (the kernels alone; ours at M <= 4 overlap the call
ahead, as programmatic launches do back to back: bench/repro_gemv_chain.py compares that with one
launch after another).

    python bench/repro_gemm.py [--quick] [--sweep | --sweep-only] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from tasks.reproducible.cpu_reference import reproducible_matmul_cpu  # noqa: E402
from tasks.reproducible.gemm import effective_config, reproducible_matmul  # noqa: E402

# (name, K, N): Llama-3.1-8B and Qwen2.5-7B layer shapes, K x N = in x out features.
SHAPES = [
    ("llama gate/up", 4096, 14336),
    ("llama down", 14336, 4096),
    ("llama q/o", 4096, 4096),
    ("llama lm_head", 4096, 128256),
    ("qwen gate/up", 3584, 18944),
    ("qwen down", 18944, 3584),
    ("qwen qkv", 3584, 4608),
]
DECODE_M = (1, 4, 16)
SMALL_M = (64,)
PREFILL_M = (512, 4096)
PREFILL_SHAPES = ("llama gate/up", "llama down", "llama q/o", "qwen gate/up")

# Kernel variants for --sweep (every one computes the same bits; the fastest become the defaults
# in tasks/reproducible/cuda_kernels.py): the row-block GEMV's (weight rows per thread, k per
# stage, stages) for up to 4 and for 8-16 rows of x, the persistent GEMV's (k per stage, stages,
# programs per SM), the SGEMM's (output rows per thread, k per tile, x stages, programs per SM),
# whole or split by chunk.
ROW_BLOCK_SWEEP = {
    "few": [(1, 64, 4), (1, 128, 3), (1, 128, 4), (1, 256, 2), (1, 256, 3)],
    "many": [(2, 32, 4), (2, 64, 3), (1, 64, 4)],
}
PERSISTENT_SWEEP = [(8, 1), (6, 1), (5, 1), (4, 1), (3, 1), (2, 1), (4, 2)]
GEMV_SWEEP_CASES = [(4096, 14336, 1), (14336, 4096, 1), (4096, 4096, 1), (4096, 128256, 1), (3584, 18944, 1),
                    (18944, 3584, 1), (4096, 14336, 4), (4096, 14336, 16), (4096, 4096, 16)]  # fmt: skip
SGEMM_SWEEP = [(8, 16, 3, 2), (8, 16, 4, 2), (8, 8, 3, 2), (8, 8, 4, 2), (16, 16, 3, 2), (16, 8, 3, 2)]
SGEMM_SWEEP_CASES = [(4096, 4096, 4096), (4096, 14336, 4096), (14336, 4096, 4096), (14336, 4096, 512), (4096, 4096, 512),
                     (3584, 18944, 512), (4096, 4096, 128), (14336, 4096, 256)]  # fmt: skip
# --sweep-part sgemm-tail: the default SGEMM at every prefill row of the table, whole tiles only
# against the default launch (the last wave's columns of tiles split by chunk where config.py
# says).
SGEMM_TAIL_KINDS = ("sgemm-whole", "sgemm")


def bench_ms(fn) -> float:
    import triton

    return triton.testing.do_bench(fn, warmup=10, rep=60, return_mode="median")


L2_BYTES = 60 * 2**20
CALL_ROUNDS = 3


def graph_ms(calls: list, reps: int) -> float:
    """Median per-call device time of `reps` calls (cycling through `calls`) captured in one CUDA
    graph, over 5 replays."""
    for c in calls:
        c()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for i in range(reps):
            calls[i % len(calls)]()
    graph.replay()
    times = []
    for _ in range(5):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / reps)
    del graph
    return sorted(times)[2]


def time_methods(x: torch.Tensor, wb: torch.Tensor, wf: torch.Tensor, copies: list) -> dict[str, float]:
    """Median ms of the four ways to compute x @ W.T (x bf16, wb the bf16 weight, wf its fp32
    copy): call times, then device times (graph replays over `copies`, [(bf16, fp32), ...])."""
    xf = x.float()
    calls = {
        "cublas_bf16": lambda: F.linear(x, wb),
        "sgemm_fp32": lambda: F.linear(xf, wf),
        "layercast": lambda: F.linear(x.float(), wb.float()),
        "ours": lambda: reproducible_matmul(x, wb),
    }
    rounds = [{name: bench_ms(fn) for name, fn in calls.items()} for _ in range(CALL_ROUNDS)]
    t = {name: sorted(r[name] for r in rounds)[CALL_ROUNDS // 2] for name in calls}
    reps = max(2, min(24, int(30 / max(t["sgemm_fp32"], 1e-3))))
    t["dev_cublas_bf16"] = graph_ms([lambda b=b: F.linear(x, b) for b, _ in copies], reps)
    t["dev_sgemm_fp32"] = graph_ms([lambda f=f: F.linear(xf, f) for _, f in copies], reps)
    t["dev_layercast"] = graph_ms([lambda b=b: F.linear(x.float(), b.float()) for b, _ in copies], reps)
    t["dev_ours"] = graph_ms([lambda b=b: reproducible_matmul(x, b) for b, _ in copies], reps)
    return t


def weight_copies(n: int, k: int, dev) -> list[torch.Tensor]:
    """Enough copies of one random bf16 weight to exceed 3x the L2 when cycled."""
    wb = (torch.randn(n, k, device=dev) * k**-0.5).to(torch.bfloat16)
    return [wb] + [wb.clone() for _ in range(max(1, -(-3 * L2_BYTES // (n * k * 2))) - 1)]


def variant_call(kind: str, v: tuple, x: torch.Tensor, n: int):
    """weight -> output of one kernel variant for this x; None where the variant cannot run."""
    from tasks.reproducible import cuda_kernels as ck

    m, k = x.shape
    if kind == "cublas_bf16":
        return lambda w: F.linear(x, w)
    if kind == "layercast":
        return lambda w: F.linear(x.float(), w.float())
    if kind == "row-block":
        mb = next(r for r in ck.ROW_BLOCK_VARIANTS if r >= m)
        if ck.gemv_smem_bytes(mb, v) > ck.max_dynamic_smem():
            return None
        return lambda w: ck.gemv(x, w, None, variant=v)
    if kind == "persistent":
        if not ck.gemv_persistent_fits(m, n, k, v, x.dtype):
            return None
        return lambda w: ck.gemv_persistent(x, w, None, variant=v)
    if kind == "sgemm-whole":
        return lambda w: ck.sgemm(x, w, None, tail_columns=0, variant=v)
    return lambda w: ck.sgemm(x, w, None, split=kind == "sgemm-split", variant=v)


def device_ms(fn, copies: list[torch.Tensor]) -> float:
    call = bench_ms(lambda: fn(copies[0]))
    return graph_ms([lambda w=w: fn(w) for w in copies], max(3, min(24, int(30 / max(call, 1e-3)))))


def sweep(dev, gen: torch.Generator, bw: float, part: str = "all") -> list[dict]:
    """Device time of every kernel variant at the sweep shapes (`part`: all, gemv or sgemm), each
    checked bit for bit against the default path, itself checked against the CPU emulation."""
    rows = []
    jobs = []
    for k, n, m in GEMV_SWEEP_CASES if part in ("all", "gemv") else []:
        jobs += [("cublas_bf16", k, n, m, ())]
        jobs += [("row-block", k, n, m, v) for v in ROW_BLOCK_SWEEP["few" if m <= 4 else "many"]]
        jobs += [("persistent", k, n, m, v) for v in PERSISTENT_SWEEP if m <= 4]
    for k, n, m in SGEMM_SWEEP_CASES if part in ("all", "sgemm") else []:
        jobs += [("layercast", k, n, m, ())]
        jobs += [(kind, k, n, m, v) for v in SGEMM_SWEEP for kind in ("sgemm", "sgemm-split")]
    if part == "sgemm-tail":
        from tasks.reproducible.cuda_kernels import SGEMM_VARIANT

        for name, k, n in SHAPES:
            for m in PREFILL_M if name in PREFILL_SHAPES else ():
                jobs += [("layercast", k, n, m, ())] + [(kind, k, n, m, SGEMM_VARIANT) for kind in SGEMM_TAIL_KINDS]
    copies, x, base, base_ok, sample, key = None, None, None, False, "", None
    for kind, k, n, m, v in jobs:
        if key != (k, n, m):
            key, copies = (k, n, m), None
            copies = weight_copies(n, k, dev)
            x = torch.randn(m, k, device=dev).to(torch.bfloat16)
            base = reproducible_matmul(x, copies[0])
            base_ok, sample = check_bitwise(x, copies[0], base, gen)  # every variant is compared with base
        fn = variant_call(kind, v, x, n)
        if fn is None:
            continue
        try:
            y = fn(copies[0])
            same = torch.equal(y.float().view(torch.int32), base.view(torch.int32))
            ok = base_ok and same
            ms = device_ms(fn, copies)
        except Exception as exc:  # noqa: BLE001 - a variant that fails is reported, not fatal
            print(f"sweep {kind} K={k} N={n} M={m} {v}: FAILED {type(exc).__name__}: {exc}", flush=True)
            rows.append({"kind": kind, "K": k, "N": n, "M": m, "variant": list(v), "error": str(exc)})
            continue
        gbs = n * k * 2 / (ms * 1e-3) / 1e9
        tflops = 2 * m * n * k / (ms * 1e-3) / 1e12
        rows.append({"kind": kind, "K": k, "N": n, "M": m, "variant": list(v), "ms": ms, "same_bits": same,
                     "bitwise_vs_cpu": ok, "weight_bw_share": gbs * 1e9 / bw, "tflops": tflops})  # fmt: skip
        print(f"sweep {kind:12s} K={k:5d} N={n:6d} M={m:4d} {str(v):14s} {ms * 1e3:9.1f} us "
              f"{100 * gbs * 1e9 / bw:5.1f}% bw {tflops:5.1f} TFLOP/s same bits {same} vs CPU {ok} ({sample})",
              flush=True)  # fmt: skip
    return rows


def copy_bandwidth() -> float:
    """Bytes read plus written per second by a 2 GiB device-to-device copy."""
    src = torch.randn(2**29, device="cuda")
    dst = torch.empty_like(src)
    ms = bench_ms(lambda: dst.copy_(src))
    return 2 * src.numel() * 4 / (ms * 1e-3)


def check_bitwise(x: torch.Tensor, w: torch.Tensor, ours: torch.Tensor, gen: torch.Generator) -> tuple[bool, str]:
    """Compare sampled rows and columns of ours with the CPU emulation, bit for bit."""
    m, n = ours.shape
    rows = list(range(m)) if m <= 16 else [0, m // 2, m - 1]
    cols = torch.arange(n) if n <= 1024 else torch.randperm(n, generator=gen)[:1024].sort().values
    want = reproducible_matmul_cpu(x[rows].cpu(), w[cols.to(w.device)].cpu())
    got = ours[rows][:, cols.to(ours.device)].cpu()
    same = torch.equal(want.view(torch.int32), got.view(torch.int32))
    return same, f"{len(rows)}x{len(cols)}"


def run(args) -> dict:
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_num_threads(min(16, os.cpu_count() or 1))
    dev = torch.device("cuda")
    gen = torch.Generator().manual_seed(0)
    bw = copy_bandwidth()
    print(
        f"device {torch.cuda.get_device_name()}, torch {torch.__version__}, copy bandwidth {bw / 1e12:.2f} TB/s",
        flush=True,
    )
    results = {"device": torch.cuda.get_device_name(), "copy_bw": bw, "rows": [], "sweep": []}

    cases = []
    for name, k, n in SHAPES:
        for m in DECODE_M + SMALL_M:
            cases.append((name, k, n, m))
        if name in PREFILL_SHAPES:
            for m in PREFILL_M:
                cases.append((name, k, n, m))
    if args.quick:
        cases = [c for c in cases if c[3] in (1, 16, 4096) and c[0] in ("llama gate/up", "llama down")]
    if args.m:
        cases = [c for c in cases if c[3] in {int(v) for v in args.m.split(",")}]
    if args.sweep_only:
        cases = []

    weights = {}
    for name, k, n, m in cases:
        if (k, n) not in weights:
            weights.clear()
            weights[(k, n)] = [(w, w.float()) for w in weight_copies(n, k, dev)]
        copies = weights[(k, n)]
        wb, wf = copies[0]
        x = torch.randn(m, k, device=dev).to(torch.bfloat16)
        ours = reproducible_matmul(x, wb)
        t0 = time.time()
        ok, sample = check_bitwise(x, wb, ours, gen)
        check_s = time.time() - t0
        again = reproducible_matmul(x, wb)
        repeat_ok = torch.equal(again.view(torch.int32), ours.view(torch.int32))
        t = time_methods(x, wb, wf, copies)
        cfg = effective_config(m, wb, x_dtype=x.dtype)
        row = {"shape": name, "K": k, "N": n, "M": m, "ms": t, "bitwise_vs_cpu": ok, "repeat_identical": repeat_ok,
               "sample": sample, "config": str(cfg), "check_s": check_s}  # fmt: skip
        results["rows"].append(row)
        wbytes = n * k * 2
        dev_gbs = wbytes / (t["dev_ours"] * 1e-3) / 1e9
        tflops = 2 * m * n * k / (t["dev_ours"] * 1e-3) / 1e12
        print(
            f"{name:14s} K={k:5d} N={n:6d} M={m:4d} | device us: cuBLAS bf16 {t['dev_cublas_bf16'] * 1e3:8.1f} "
            f"SGEMM {t['dev_sgemm_fp32'] * 1e3:8.1f} LayerCast {t['dev_layercast'] * 1e3:8.1f} ours "
            f"{t['dev_ours'] * 1e3:8.1f} ({dev_gbs:5.0f} GB/s = {100 * dev_gbs * 1e9 / bw:5.1f}% copy bw, "
            f"{tflops:5.1f} TFLOP/s; vs LayerCast {t['dev_layercast'] / t['dev_ours']:5.2f}x) | call us: "
            f"cuBLAS {t['cublas_bf16'] * 1e3:8.1f} LayerCast {t['layercast'] * 1e3:8.1f} ours {t['ours'] * 1e3:8.1f} "
            f"(vs LayerCast {t['layercast'] / t['ours']:5.2f}x) | bitwise {'yes' if ok else 'NO'} ({sample}), "
            f"repeat {'yes' if repeat_ok else 'NO'}",
            flush=True,
        )

    if args.sweep or args.sweep_only:
        results["sweep"] = sweep(dev, gen, bw, args.sweep_part)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a few shapes only")
    parser.add_argument("--m", help="only these rows of x (comma-separated M values)")
    parser.add_argument("--sweep", action="store_true", help="also time every kernel variant")
    parser.add_argument("--sweep-only", action="store_true", help="time the kernel variants only")
    parser.add_argument("--sweep-part", choices=("all", "gemv", "sgemm", "sgemm-tail"), default="all",
                        help="which kernels to sweep (all: gemv and sgemm)")  # fmt: skip
    parser.add_argument("--json", help="write all figures to this file")
    args = parser.parse_args()
    results = run(args)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    bad = [r for r in results["rows"] if not (r["bitwise_vs_cpu"] and r["repeat_identical"])]
    print(f"{len(results['rows'])} shapes, {len(bad)} not bitwise equal to the CPU emulation")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
