"""Probe of the timed loop on one GPU: the same reference timed against itself and against another
solution, with rotating input sets or one set, next to torch's Timer and Triton's do_bench.
Prints per-iteration quantiles, so outliers and run-to-run shifts can be seen.

    python bench/timing_probe.py [--problem allgather] [--shape large]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.utils.benchmark as benchmark  # noqa: E402

import tasks  # noqa: E402
from evaluator import timing  # noqa: E402
from tasks.spec import InputContext  # noqa: E402


def quantiles(samples):
    s = sorted(samples)
    q = lambda p: s[min(len(s) - 1, int(p * len(s)))]  # noqa: E731
    return f"mean {statistics.fmean(s):7.1f}  p10 {q(.1):7.1f}  p50 {q(.5):7.1f}  p90 {q(.9):7.1f}  max {s[-1]:7.1f}"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--problem", default="allgather")
    parser.add_argument("--shape", default="large")
    parser.add_argument("--other", type=Path, default=ROOT / "examples" / "solutions" / "allgather_symm_mem.py")
    args = parser.parse_args()
    os.environ.update(NCCL_NVLS_ENABLE="0", TORCH_SYMM_MEM_DISABLE_MULTICAST="1", NVSHMEM_DISABLE_NVLS="1")
    dist.init_process_group("nccl", init_method="tcp://127.0.0.1:29541", rank=0, world_size=1,
                            device_id=torch.device("cuda", 0))
    torch.cuda.set_device(0)
    spec, ref = tasks.get(args.problem), tasks.load_reference(args.problem)
    dims = dict(spec.shape(args.shape).dims)

    def make(seed):
        g = torch.Generator(device="cuda")
        g.manual_seed(seed)
        return tuple(ref.make_inputs(InputContext(0, 1, dims, torch.bfloat16, torch.device("cuda"), g, g)))

    sets = [make(i) for i in range(64)]
    module_spec = importlib.util.spec_from_file_location("other_solution", args.other)
    other = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(other)
    align = torch.cuda.synchronize
    for label, sides, pool in [
        ("ref vs ref, 60 sets", {"a": ref.solution, "b": ref.solution}, sets[4:]),
        ("ref vs other, 60 sets", {"ref": ref.solution, "other": other.solution}, sets[4:]),
        ("ref vs ref, 1 set", {"a": ref.solution, "b": ref.solution}, sets[4:5]),
        ("ref vs ref, 60 sets, again", {"a": ref.solution, "b": ref.solution}, sets[4:]),
    ]:
        for fn in sides.values():
            timing.warm_up(fn, sets[:4], 500, True)
        out = timing.side_by_side(sides, pool, 100, 4, True, align)
        for name, data in out.items():
            print(f"{label:28s} {name:6s} {quantiles(data['samples_us'])}  wall/iter {data['wall_us'] / 100:7.1f}")
    x = sets[4]
    t = benchmark.Timer(stmt="f(*x)", globals={"f": ref.solution, "x": x}).blocked_autorange(min_run_time=1.0)
    print(f"torch Timer: mean {t.mean * 1e6:.1f} us, median {t.median * 1e6:.1f} us")
    try:
        import triton.testing

        print(f"do_bench median: {1e3 * triton.testing.do_bench(lambda: ref.solution(*x), return_mode='median'):.1f} us")
    except ImportError:
        pass
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
