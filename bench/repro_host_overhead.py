"""Host time of one reproducible_matmul call at decode sizes, next to F.linear: how long Python
takes to check the arguments, pick the launch and enqueue the kernels (the GPU work is not
waited for; the stream is drained every 50 calls so the launch queue never fills). In eager
decoding the host sets the pace whenever this exceeds the kernels' GPU time.

    python bench/repro_host_overhead.py [--json PATH]
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

from tasks.reproducible.gemm import effective_config, reproducible_matmul  # noqa: E402

CASES = [(1, 4096, 4096), (4, 4096, 4096), (16, 4096, 4096), (16, 14336, 4096), (1, 128256, 4096)]  # M, N, K
CALLS = 400


def host_us(fn) -> list[float]:
    """Sorted host microseconds of CALLS calls of fn."""
    for _ in range(20):
        fn()
    torch.cuda.synchronize()
    times = []
    for i in range(CALLS):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e6)
        if i % 50 == 49:
            torch.cuda.synchronize()
    torch.cuda.synchronize()
    return sorted(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", help="write the figures here")
    args = parser.parse_args()
    rows = []
    for m, n, k in CASES:
        w = torch.randn(n, k, device="cuda").bfloat16()
        x = torch.randn(m, k, device="cuda").bfloat16()
        kernel = effective_config(m, w, x_dtype=x.dtype).kernel
        methods = {"F.linear": lambda x=x, w=w: F.linear(x, w), "ours": lambda x=x, w=w: reproducible_matmul(x, w)}
        for name, fn in methods.items():
            t = host_us(fn)
            row = {"M": m, "N": n, "K": k, "method": name, "median_us": t[CALLS // 2], "p90_us": t[CALLS * 9 // 10]}
            rows.append(row)
            print(f"M={m:3d} N={n:6d} K={k:5d} {name:8s} ({kernel if name == 'ours' else 'cuBLAS'}): host us per "
                  f"call median {row['median_us']:6.1f}, p90 {row['p90_us']:6.1f}", flush=True)  # fmt: skip
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
