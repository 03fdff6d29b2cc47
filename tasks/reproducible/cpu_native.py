"""The CPU reference's FMA chains compiled from C (`cpu_chains.c`), when a C compiler is present.

The float64 emulation in cpu_reference.py is exact but makes 17 passes over every partial per k;
a decode-sized layer (16 x 7168 x 4096) takes seconds, and a `cpu`-mode evaluation calls it dozens
of times. The C loop computes the same chains with the C library's `fmaf` (one rounding, IEEE
subnormals forced on), tens of times faster. It is built once per process into a private temporary
directory (nothing shared between evaluations that a submission could replace), with the host's
FMA instructions where the CPU has them; where no compiler works, or with PKB_REPRO_CPU_NATIVE=0,
the emulation is used. Both give the same bits (tests/test_repro_cpu.py).
"""

from __future__ import annotations

import ctypes
import functools
import logging
import os
import platform
import shutil
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import torch

from tasks.reproducible.config import CHUNK, split_count

log = logging.getLogger(__name__)

SOURCE = Path(__file__).with_name("cpu_chains.c")
COLUMN_BLOCK = 512  # columns per work item: its chunk of the weight, k-major, stays in the L2


def enabled() -> bool:
    return os.environ.get("PKB_REPRO_CPU_NATIVE", "1") != "0"


def _compile_flags() -> list[str]:
    flags = ["-O3", "-std=c11", "-fno-math-errno", "-fPIC", "-shared"]
    if platform.machine() in ("x86_64", "AMD64"):
        try:
            cpu_flags = Path("/proc/cpuinfo").read_text().split()
        except OSError:
            cpu_flags = []
        if "fma" in cpu_flags and "avx2" in cpu_flags:
            flags += ["-mfma", "-mavx2"]  # fmaf becomes vfmadd, vectorized; same single rounding
    return flags


@functools.cache
def library() -> ctypes.CDLL | None:
    """The compiled chains, or None (no compiler, a failed build, or disabled)."""
    if not enabled():
        return None
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if not cc:
        log.info("no C compiler: the CPU reference uses its float64 emulation")
        return None
    build_dir = tempfile.mkdtemp(prefix="pkb-repro-cpu-")
    out = Path(build_dir) / "cpu_chains.so"
    try:
        subprocess.run([cc, *_compile_flags(), "-o", str(out), str(SOURCE), "-lm"], check=True, capture_output=True,
                       timeout=120)  # fmt: skip
        lib = ctypes.CDLL(str(out))
    except (OSError, subprocess.SubprocessError) as exc:
        shutil.rmtree(build_dir, ignore_errors=True)
        detail = getattr(exc, "stderr", b"") or b""
        log.warning("building the CPU reference's chains failed (%s %s); using the float64 emulation", exc,
                    detail.decode(errors="replace")[-500:])  # fmt: skip
        return None
    shutil.rmtree(build_dir, ignore_errors=True)  # the loaded library stays mapped
    fn = lib.repro_chain_partials
    fn.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_int64] * 9 + [ctypes.c_void_p]
    fn.restype = None
    return lib


def chain_partials(x32: torch.Tensor, w32: torch.Tensor) -> torch.Tensor | None:
    """[B, S, M, N] chunk partials for x32 [B, M, K] and w32 [B, N, K] (fp32, CPU), as
    cpu_reference.chain_partials computes them; None where the compiled chains are unavailable."""
    lib = library()
    if lib is None:
        return None
    bsz, m, k = x32.shape
    n = w32.shape[1]
    s = split_count(k)
    x = x32.to(torch.float32).contiguous()
    w = w32.to(torch.float32).contiguous()
    out = torch.empty((bsz, s, m, n), dtype=torch.float32)
    if out.numel() == 0:
        return out
    length = min(CHUNK, k)
    items = bsz * s * -(-n // COLUMN_BLOCK)
    workers = max(1, min(torch.get_num_threads(), items))
    bounds = [items * i // workers for i in range(workers + 1)]
    scratch = torch.empty((workers, length * min(n, COLUMN_BLOCK)), dtype=torch.float32)
    args = (x.data_ptr(), w.data_ptr(), out.data_ptr(), bsz, s, m, length, n, k, COLUMN_BLOCK)

    def run(i: int) -> None:
        lib.repro_chain_partials(*args, bounds[i], bounds[i + 1], scratch[i].data_ptr())

    if workers == 1:
        run(0)
    else:  # ctypes releases the GIL during the call, so the threads run in parallel
        with ThreadPoolExecutor(workers) as pool:
            list(pool.map(run, range(workers)))
    return out
