"""One call of each chosen GEMM kernel at one shape, for a profiler to capture (the NVRTC build
and the fp32 copies cuBLAS's SGEMM gets are not kernels of those names).

    ncu --clock-control none -k regex:'repro_|gemm' python bench/repro_kernel_once.py \
        --kernels sgemm,cublas_sgemm --m 4096 --n 4096 --k 4096
"""

from __future__ import annotations

import argparse
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from tasks.reproducible import cuda_kernels as ck  # noqa: E402


def calls(sgemm_variant: tuple | None = None) -> dict:
    return {
        "sgemm": lambda x, w: ck.sgemm(x, w, None, variant=sgemm_variant),
        "sgemm_split": lambda x, w: ck.sgemm(x, w, None, split=True, variant=sgemm_variant),
        "gemv": lambda x, w: ck.gemv(x, w, None),
        "gemv_persistent": lambda x, w: ck.gemv_persistent(x, w, None),
        "cublas_sgemm": lambda x, w: F.linear(x.float(), w.float()),
        "cublas_bf16": lambda x, w: F.linear(x, w),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kernels", default="sgemm,cublas_sgemm", help=f"comma-separated, of {sorted(calls())}")
    parser.add_argument("--m", type=int, default=4096)
    parser.add_argument("--n", type=int, default=4096)
    parser.add_argument("--k", type=int, default=4096)
    parser.add_argument("--sgemm-variant", help="rows per thread, k per tile, stages, programs per SM: 16,16,4,2")
    args = parser.parse_args()
    chosen = calls(tuple(int(v) for v in args.sgemm_variant.split(",")) if args.sgemm_variant else None)
    torch.backends.cuda.matmul.allow_tf32 = False
    x = torch.randn(args.m, args.k, device="cuda").to(torch.bfloat16)
    w = (torch.randn(args.n, args.k, device="cuda") * args.k**-0.5).to(torch.bfloat16)
    for name in args.kernels.split(","):
        # cuBLAS's SGEMM gets its fp32 operands outside the profiled call, as a resident model would.
        xi, wi = (x.float(), w.float()) if name == "cublas_sgemm" else (x, w)
        chosen[name](xi, wi)
        torch.cuda.synchronize()
        print(f"{name}: called at M={args.m} N={args.n} K={args.k}", flush=True)


if __name__ == "__main__":
    main()
