"""Are the known-ratio rulers exact without the judge? The known-ratio tests expect a solution that
calls the reference twice per call to read 0.5, and one that adds a 1000 us wait per call to read
1000 us longer. Where the judge reads otherwise, either the judge or the ruler is off. Here each
ruler is timed against the reference in one plain process at world 1, without the judge (no
sandbox, no protocol, no null batches): batches of K calls on K fresh input sets, the two sides
alternating which goes first, the median of paired ratios with the judge's interval. With
--judge, the judge's reading of the same ruler on the same shape is printed beside it.

    python bench/ruler_check.py [--device cpu|cuda] [--problems allgather,...] [--shapes all|NAME]
                                [--rulers twice,wait] [--wait-us 1000] [--pairs 30] [--judge]
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import os
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

import tasks  # noqa: E402
from evaluator import calibration, timing_stats  # noqa: E402
from evaluator.judge import draw_inputs  # noqa: E402
from evaluator.launch import CPU_DEFAULTS, EvaluationRequest, evaluate  # noqa: E402
from evaluator.loading import load_problem  # noqa: E402
from evaluator.sandbox import NO_MULTICAST  # noqa: E402

PROBLEMS = "allgather,fp8_reduce_scatter_grads,tp_muon_orthogonalization"
BATCH_TARGET_S = 0.01  # a batch lasts about this long: long against the host clock's resolution


def ruler_source(problem: str, ruler: str, wait_us: float) -> str:
    return calibration.repeated(problem, 2) if ruler == "twice" else calibration.waiting(problem, wait_us)


def as_function(source: str, name: str, folder: Path):
    """The ruler's `solution`, imported from a file (Triton compiles only functions it can read
    the source file of)."""
    path = folder / f"{name}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module.solution


def time_batch(fn, sets: list[tuple], device: torch.device) -> float:
    """Seconds per call over the batch, from the first call to the last one's end."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    t0 = time.perf_counter_ns()
    for s in sets:
        fn(*s)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return (time.perf_counter_ns() - t0) / len(sets) / 1e3


def standalone(problem_id: str, shape: str, ruler_fn, device: torch.device,
               pairs: int) -> tuple[timing_stats.Ratio, float, float, float]:
    """Per call: the reference / ruler ratio, the reference's and the ruler's us, and what the
    ruler adds in us. Each is a median over pairs; the last, the median of the pairs'
    differences, which a slow spell of the host moves less than the difference of two medians."""
    problem = load_problem({"kind": "suite", "id": problem_id})
    dims = dict(tasks.get(problem_id).shape(shape).dims)
    counter = iter(range(1, 1 << 30))

    def fresh(k: int) -> list[tuple]:
        return [draw_inputs(problem, 0, 1, dims, next(counter), next(counter), device) for _ in range(k)]

    warm = fresh(5)
    for fn in (problem.reference, ruler_fn):
        time_batch(fn, warm, device)
    k = max(1, min(200, round(BATCH_TARGET_S * 1e6 / time_batch(ruler_fn, warm, device))))
    ref_us, ruler_us = [], []
    for i in range(pairs):
        sets = fresh(k)
        sides = [(problem.reference, ref_us), (ruler_fn, ruler_us)]
        for fn, out in sides if i % 2 == 0 else sides[::-1]:
            out.append(time_batch(fn, sets, device))
    ratio = timing_stats.paired_ratio(ref_us, ruler_us)
    added = statistics.median(r - f for f, r in zip(ref_us, ruler_us))
    return ratio, statistics.median(ref_us), statistics.median(ruler_us), added


def judged(problem: str, shape: str, code: str, mode: str) -> dict:
    # On the CPU, the platform's CPU workers' settings (one trial: correctness is not the question).
    settings = {"warmup": CPU_DEFAULTS["warmup"], "iters": CPU_DEFAULTS["iters"], "trials": 1} if mode == "cpu" else {}
    doc = evaluate(EvaluationRequest(problem=problem, solution_code=code, world_size=1, mode=mode, shapes=[shape],
                                     **settings))
    if doc["status"] != "correct":
        raise SystemExit(f"{problem}/{shape}: {doc['status']}: {doc['reason']}")
    return doc["shapes"][0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--problems", default=PROBLEMS)
    parser.add_argument("--shapes", default="all", help="all, or one shape name")
    parser.add_argument("--rulers", default="twice,wait")
    parser.add_argument("--wait-us", type=float, default=1000.0)
    parser.add_argument("--pairs", type=int, default=30)
    parser.add_argument("--judge", action="store_true", help="also judge each ruler (gpu mode, or cpu mode on the CPU)")
    args = parser.parse_args()

    os.environ.update(NO_MULTICAST)
    device = torch.device(args.device, 0) if args.device == "cuda" else torch.device("cpu")
    if device.type == "cuda":
        torch.cuda.set_device(device)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    dist.init_process_group("nccl" if device.type == "cuda" else "gloo", init_method=f"tcp://127.0.0.1:{port}",
                            rank=0, world_size=1)
    mode = "gpu" if device.type == "cuda" else "cpu"
    folder = Path(tempfile.mkdtemp(prefix="rulers-"))
    table = Table(title=f"rulers at world 1 on {torch.cuda.get_device_name(device) if device.type == 'cuda' else 'the CPU'}")
    for col in ("problem", "shape", "ruler", "reference us", "ruler us", "plain process", "wait read us", "the judge"):
        table.add_column(col, justify="left" if col in ("problem", "shape", "ruler") else "right")
    for pid in [p for p in args.problems.split(",") if p]:
        spec = tasks.get(pid)
        shapes = [s.name for s in spec.shapes] if args.shapes == "all" else [args.shapes]
        for ruler in [r for r in args.rulers.split(",") if r]:
            code = ruler_source(pid, ruler, args.wait_us)
            fn = as_function(code, f"ruler_{pid}_{ruler}", folder)
            for shape in shapes:
                ratio, ref_us, ruler_us, added_us = standalone(pid, shape, fn, device, args.pairs)
                wait_read = f"{added_us:.1f}" if ruler == "wait" else ""
                judge = ""
                if args.judge:
                    found = judged(pid, shape, code, mode)
                    low, high = found["speedup_interval"] or (math.nan, math.nan)  # none: too fast to bound
                    judge = f"{found['speedup']:.4f} [{low:.4f}, {high:.4f}]"
                    if ruler == "wait":
                        judge += f" ({found['solution']['time_us'] - found['reference']['time_us']:.1f} us)"
                table.add_row(pid, shape, ruler, f"{ref_us:.1f}", f"{ruler_us:.1f}",
                              f"{ratio.value:.4f} [{ratio.low:.4f}, {ratio.high:.4f}]", wait_read, judge)
                print(pid, shape, ruler, f"{ratio.value:.4f}", wait_read, judge, flush=True)
    Console(width=200).print(table)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
