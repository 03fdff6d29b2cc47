"""The reproducible GEMM's CPU reference: compiled FMA chains against the float64 emulation, per
call, at the repro problems' CPU-sized shapes (one rank's share at world 2), and their bits.

    python bench/repro_cpu_reference.py [--threads N]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from tasks.reproducible import cpu_native  # noqa: E402
from tasks.reproducible.cpu_reference import chain_partials_emulated  # noqa: E402

SHAPES = [  # (what, M, N, K)
    ("repro_linear decode, one rank of 2", 16, 7168, 4096),
    ("repro_tp_row_linear decode, one rank of 2", 16, 4096, 7168),
    ("tiny", 4, 32, 200),
    ("lm_head at M = 1, one rank of 2", 1, 64128, 4096),
]


def timed(fn, x: torch.Tensor, w: torch.Tensor, repeat: int = 3) -> tuple[float, torch.Tensor]:
    """Best of `repeat` wall times of fn(x, w), and its result."""
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn(x, w)
        best = min(best, time.perf_counter() - start)
    return best, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    start = time.perf_counter()
    built = cpu_native.library() is not None
    print(f"{args.threads} threads; compiled chains {'built in %.2f s' % (time.perf_counter() - start) if built else 'unavailable'}")
    for what, m, n, k in SHAPES:
        g = torch.Generator().manual_seed(0)
        x = torch.randn(1, m, k, generator=g).to(torch.bfloat16).float()
        w = (torch.randn(1, n, k, generator=g) * k**-0.5).to(torch.bfloat16).float()
        emulated, want = timed(chain_partials_emulated, x, w, repeat=1)
        line = f"{what:44s} M={m:3d} N={n:6d} K={k:5d}: emulation {emulated:7.3f} s"
        if built:
            compiled, got = timed(cpu_native.chain_partials, x, w)
            same = torch.equal(got.view(torch.int32), want.view(torch.int32))
            line += f", compiled {compiled:7.3f} s ({emulated / compiled:5.1f}x), same bits {'yes' if same else 'NO'}"
        print(line, flush=True)


if __name__ == "__main__":
    main()
