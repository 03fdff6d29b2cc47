"""Decode GEMVs back to back on one GPU, as a decode step's layers run: the persistent GEMV (M <= 4)
launched as a programmatic dependent of the kernel ahead (the default: the next call's programs
start on the SMs the last one frees and fetch their first weights into L2 while it drains), and
the row-block GEMV and its combine (M = 16, and M = 4 where the persistent one does not fit) the
same way, against the same kernels launched one after another, beside cuBLAS bf16; and the
overlapped launch told that the weight is static (frozen inference weights: the persistent GEMV
copies its first stages in before the kernel ahead ends; the other kernels ignore it). Each figure
is the median per-call device time of CUDA-graph replays of 24 calls that cycle through enough
weight copies to miss in L2 (repro_gemm.py's "device" time), as a share of the measured copy
bandwidth; the outputs of every launch mode are compared bit for bit with each other and, on
sampled columns, with the CPU emulation.

    python bench/repro_gemv_chain.py [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from repro_gemm import SHAPES, check_bitwise, copy_bandwidth, graph_ms, weight_copies  # noqa: E402

from tasks.reproducible import cuda_kernels  # noqa: E402
from tasks.reproducible.gemm import reproducible_matmul  # noqa: E402

ROWS = (1, 4, 16)
CALLS = 24


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", help="write all figures to this file")
    args = parser.parse_args()
    torch.set_num_threads(min(16, os.cpu_count() or 1))
    dev, gen = torch.device("cuda"), torch.Generator().manual_seed(0)
    bw = copy_bandwidth()
    print(f"device {torch.cuda.get_device_name()}, torch {torch.__version__}, copy bandwidth {bw / 1e12:.2f} TB/s")
    rows, bad = [], 0
    for name, k, n in SHAPES:
        copies = weight_copies(n, k, dev)
        share = n * k * 2 / bw  # seconds the weight takes at the copy bandwidth
        for m in ROWS:
            x = torch.randn(m, k, device=dev).to(torch.bfloat16)
            t = {"cublas_bf16": graph_ms([lambda w=w, x=x: F.linear(x, w) for w in copies], CALLS)}
            outs = {}
            for mode, programmatic, static in (("overlapped", True, False), ("static", True, True),
                                               ("serial", False, False)):  # fmt: skip
                cuda_kernels.PROGRAMMATIC_GEMV = programmatic
                outs[mode] = reproducible_matmul(x, copies[0], static_weight=static)
                t[mode] = graph_ms(
                    [lambda w=w, x=x, s=static: reproducible_matmul(x, w, static_weight=s) for w in copies], CALLS
                )
            cuda_kernels.PROGRAMMATIC_GEMV = True
            same = all(torch.equal(out.view(torch.int32), outs["serial"].view(torch.int32)) for out in outs.values())
            ok, sample = check_bitwise(x, copies[0], outs["overlapped"], gen)
            bad += not (same and ok)
            pct = {key: 100 * share / (ms * 1e-3) for key, ms in t.items()}
            rows.append({"shape": name, "K": k, "N": n, "M": m, "ms": t, "copy_bw_pct": pct, "same_bits": same,
                         "bitwise_vs_cpu": ok})  # fmt: skip
            print(
                f"{name:14s} K={k:5d} N={n:6d} M={m} | device us: cuBLAS bf16 {t['cublas_bf16'] * 1e3:7.1f} "
                f"({pct['cublas_bf16']:5.1f}%), ours overlapped {t['overlapped'] * 1e3:7.1f} ({pct['overlapped']:5.1f}%), "
                f"static weight {t['static'] * 1e3:7.1f} ({pct['static']:5.1f}%), "
                f"serial {t['serial'] * 1e3:7.1f} ({pct['serial']:5.1f}%) | same bits {same}, vs CPU {ok} ({sample})",
                flush=True,
            )
        del copies
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "copy_bw": bw, "rows": rows}, f, indent=1)
    print(f"{len(rows)} cases, {bad} not bitwise equal")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
