"""Every problem's reference timed against an identical copy of itself, one evaluation per problem:
the reference time on this machine (the figure solutions are compared with) and how far apart two
timings of the same code land (the noise a ranking has to beat; the goal is a few percent).

    python bench/suite_timings.py --mode gpu --world-size 2 [--problems a,b] [--shape default] [--json out.json]

Problems whose world sizes exclude --world-size are skipped. In `cpu` and `shared-gpu` modes the
timings mean nothing; those modes only check that the script runs.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rich.console import Console  # noqa: E402
from rich.progress import track  # noqa: E402
from rich.table import Table  # noqa: E402

import tasks  # noqa: E402
from evaluator.launch import EvaluationRequest, evaluate  # noqa: E402


def measure(problem_id: str, args) -> dict:
    problem = tasks.get(problem_id)
    shape = problem.default_shape.name if args.shape == "default" else args.shape
    t0 = time.perf_counter()
    doc = evaluate(
        EvaluationRequest(
            problem=problem_id, solution_code=tasks.reference_source(problem_id), world_size=args.world_size,
            mode=args.mode, shapes=[shape], trials=args.trials, warmup=args.warmup, iters=args.iters,
            timeout_s=args.timeout,
        )
    )  # fmt: skip
    row = {"problem": problem_id, "shape": shape, "status": doc["status"], "reason": doc["reason"],
           "wall_s": time.perf_counter() - t0}  # fmt: skip
    if doc["status"] == "correct":
        s = doc["shapes"][0]
        copy, ref = s["solution"], s["reference"]
        row.update(
            reference_us=ref["time_us"], copy_us=copy["time_us"], ratio=copy["time_us"] / ref["time_us"],
            median_ratio=copy["per_rank"][copy["slowest_rank"]]["median_us"]
            / ref["per_rank"][ref["slowest_rank"]]["median_us"],
            utilization=(s.get("roofline") or {}).get("utilization"), notes=s["notes"],
        )  # fmt: skip
    return row


def report(rows: list[dict], console: Console) -> None:
    table = Table(title="reference against an identical copy of itself")
    for col in ("problem", "shape", "status", "reference us", "copy us", "copy / ref", "medians", "roofline"):
        table.add_column(col, justify="left" if col in ("problem", "shape", "status") else "right")
    for r in rows:
        if r["status"] != "correct":
            table.add_row(r["problem"], r["shape"], r["status"], "", "", "", "", "")
            continue
        util = f"{100 * r['utilization']:.1f}%" if r.get("utilization") is not None else "-"
        table.add_row(r["problem"], r["shape"], r["status"], f"{r['reference_us']:.1f}", f"{r['copy_us']:.1f}",
                      f"{r['ratio']:.3f}", f"{r['median_ratio']:.3f}", util)  # fmt: skip
    console.print(table)
    timed = [abs(r["ratio"] - 1) for r in rows if r["status"] == "correct"]
    if timed:
        console.print(
            f"{len(timed)} timed: |copy / ref - 1| median {100 * statistics.median(timed):.1f}%, "
            f"worst {100 * max(timed):.1f}%, over 5%: {sum(d > 0.05 for d in timed)}"
        )
    failed = [r for r in rows if r["status"] != "correct"]
    for r in failed:
        console.print(f"[red]{r['problem']}: {r['status']}: {r['reason']}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mode", default="gpu", choices=["cpu", "shared-gpu", "gpu"])
    parser.add_argument("--world-size", type=int, default=2)
    parser.add_argument("--problems", help="comma-separated ids; default: every problem that runs at this world size")
    parser.add_argument("--shape", default="default", help="a shape name, or 'default' for each problem's default")
    parser.add_argument("--trials", type=int, default=1)
    parser.add_argument("--warmup", type=int, default=500)
    parser.add_argument("--iters", type=int, default=100)
    parser.add_argument("--timeout", type=float, default=300)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    ids = args.problems.split(",") if args.problems else list(tasks.problems())
    ids = [p for p in ids if args.world_size in tasks.get(p).world_sizes]
    rows = [measure(p, args) for p in track(ids, description=f"{args.mode}, world {args.world_size}")]
    report(rows, Console(width=140))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    sys.exit(0 if all(r["status"] == "correct" for r in rows) else 1)


if __name__ == "__main__":
    main()
