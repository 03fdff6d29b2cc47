"""Are the known-ratio rulers exact without the judge? The known-ratio tests expect a solution that
calls the reference twice per call to read 0.5, and one that adds a 1000 us wait per call to read
1000 us longer. Where the judge reads otherwise, either the judge or the ruler is off. Here each
ruler is timed against the reference in plain processes, one per rank (evaluator/stopwatch.py: no
sandbox, no protocol, no null batches), and with --judge, the judge's reading of the same ruler on
the same shape and world size is printed beside it.

    python bench/ruler_check.py [--device cpu|cuda] [--world-size 1] [--problems allgather,...]
                                [--shapes all|NAME] [--rulers twice,wait] [--wait-us 1000]
                                [--pairs 30] [--calls K] [--pin-cpus 3[,4...]] [--judge]

Beside each reading, how far its pairs' ratios scatter (interquartile range over median): where the
judge's pairs scatter more than the plain processes' on the same host, the noise is the judge's.
--pin-cpus runs rank r's plain process on the r-th CPU listed only, as gpu mode places a rank's
players on one CPU. On a GPU host, more than one rank needs as many GPUs.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

import tasks  # noqa: E402
from evaluator import calibration, stopwatch, timing_stats  # noqa: E402
from evaluator.launch import CPU_DEFAULTS, EvaluationRequest, evaluate  # noqa: E402

PROBLEMS = "allgather,fp8_reduce_scatter_grads,tp_muon_orthogonalization"


def ruler_source(problem: str, ruler: str, wait_us: float) -> str:
    return calibration.repeated(problem, 2) if ruler == "twice" else calibration.waiting(problem, wait_us)


def judged(problem: str, shape: str, code: str, mode: str, world_size: int) -> dict:
    # On the CPU, the platform's CPU workers' settings (one trial: correctness is not the question).
    settings = {"warmup": CPU_DEFAULTS["warmup"], "iters": CPU_DEFAULTS["iters"], "trials": 1} if mode == "cpu" else {}
    doc = evaluate(EvaluationRequest(problem=problem, solution_code=code, world_size=world_size, mode=mode, shapes=[shape],
                                     **settings))
    if doc["status"] != "correct":
        raise SystemExit(f"{problem}/{shape}: {doc['status']}: {doc['reason']}")
    return doc["shapes"][0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--world-size", type=int, default=1)
    parser.add_argument("--problems", default=PROBLEMS)
    parser.add_argument("--shapes", default="all", help="all, or one shape name")
    parser.add_argument("--rulers", default="twice,wait")
    parser.add_argument("--wait-us", type=float, default=1000.0)
    parser.add_argument("--pairs", type=int, default=30)
    parser.add_argument("--calls", type=int, default=0, help="calls per batch; 0: as the judge sizes them on a GPU (the faster side's batch about 20 ms)")
    parser.add_argument("--pin-cpus", default="", help="CPUs for the plain processes, one per rank in turn")
    parser.add_argument("--judge", action="store_true", help="also judge each ruler (gpu mode, or cpu mode on the CPU)")
    args = parser.parse_args()

    mode = "gpu" if args.device == "cuda" else "cpu"
    where = torch.cuda.get_device_name(0) if args.device == "cuda" else "the CPU"
    table = Table(title=f"rulers at world {args.world_size} on {where}")
    cpus = tuple(int(c) for c in args.pin_cpus.split(",") if c)
    for col in ("problem", "shape", "ruler", "reference us", "ruler us", "plain processes", "wait read us", "the judge",
                "pair spread plain / judge"):
        table.add_column(col, justify="left" if col in ("problem", "shape", "ruler") else "right")
    for pid in [p for p in args.problems.split(",") if p]:
        spec = tasks.get(pid)
        shapes = [s.name for s in spec.shapes] if args.shapes == "all" else [args.shapes]
        for ruler in [r for r in args.rulers.split(",") if r]:
            code = ruler_source(pid, ruler, args.wait_us)
            for shape in shapes:
                found = stopwatch.plain_reading(pid, shape, code, args.world_size, args.device, args.pairs, args.calls,
                                                cpus)
                value, low, high = found.ratio.value, found.ratio.low, found.ratio.high
                wait_read = f"{found.added_us:.1f}" if ruler == "wait" else ""
                judge, spread = "", f"{found.pair_spread:.3f}"
                if args.judge:
                    doc = judged(pid, shape, code, mode, args.world_size)
                    j_low, j_high = doc["speedup_interval"] or (math.nan, math.nan)  # none: too fast to bound
                    ref_us, ruler_us = doc["reference"]["time_us"], doc["solution"]["time_us"]
                    judge = f"{doc['speedup']:.4f} [{j_low:.4f}, {j_high:.4f}] ({ref_us:.1f} / {ruler_us:.1f} us)"
                    if ruler == "wait":
                        judge += f" (wait {ruler_us - ref_us:.1f} us)"
                    spread += f" / {timing_stats.pair_spread(*zip(*doc['timing_run']['pairs_us'])):.3f}"
                table.add_row(pid, shape, ruler, f"{found.reference_us:.1f}", f"{found.solution_us:.1f}",
                              f"{value:.4f} [{low:.4f}, {high:.4f}]", wait_read, judge, spread)
                print(pid, shape, ruler, f"{value:.4f} ({found.reference_us:.1f} / {found.solution_us:.1f} us)",
                      wait_read, judge, f"spread {spread}", flush=True)
    Console(width=200).print(table)


if __name__ == "__main__":
    main()
