"""Timing noise: every problem's reference judged against an identical copy of itself (the reference's
source submitted as the solution), on every shape. Identical code must read 1.0: the speedup, its
95% interval (evaluator/timing_stats.py), whether the interval holds 1.0, how the timing ended, and
the evaluation's wall time, once with adaptive timing (the default budget per shape) and, with
--compare-fixed, once with the fixed schedule (exactly --iters calls), to show what adaptivity costs.

    python bench/suite_timings.py --mode gpu --world-size 1 [--problems a,b] [--shapes all|default|NAME]
    python bench/suite_timings.py --mode cpu --world-size 2 --compare-fixed
    python bench/suite_timings.py --mode gpu --world-size 1 --pkb-root CHECKOUT --problems 9,12,13 --dims 1024,1024
    python bench/suite_timings.py --mode gpu --world-size 1 --problems ring_attention_pp --shapes small --repeat 6

--resume with --json keeps the rows that file holds and judges only the problems it lacks, so a
suite longer than one session on a GPU host is measured in several and reported as one.
--repeat N judges each problem N times, each a fresh evaluation with new processes, and adds how
far the evaluations' speedups spread against one evaluation's interval. Problems whose world sizes
exclude --world-size are skipped. --watch adds what the scheduler did to each player process
(bench/player_watch.py), to tell a side short of CPU from one that ran slower on its own. In `cpu`
and `shared-gpu` modes the
timings rank nothing: there the table shows how wide the intervals are.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rich.console import Console  # noqa: E402
from rich.markup import escape  # noqa: E402
from rich.progress import track  # noqa: E402
from rich.table import Table  # noqa: E402

import tasks  # noqa: E402
from bench.player_watch import PlayerWatch  # noqa: E402
from evaluator.launch import DEFAULT_TIMING_BUDGET_S, EvaluationRequest, EvaluatorError, evaluate  # noqa: E402
from evaluator.loading import pkb_reference_file  # noqa: E402
from evaluator.results import BatchOrder, Side, allocator_note  # noqa: E402


def _jobs(args) -> list[tuple[str, list[str] | None, str]]:
    """(problem, its shape names, None for every shape or a --pkb-root base shape, the solution's source).
    A problem's shapes are judged in one evaluation, as the platform does: its wall time is the
    problem's, and the players start once."""
    if args.pkb_root:
        root = Path(args.pkb_root)
        return [(n, None, pkb_reference_file(root, int(n)).read_text()) for n in args.problems.split(",")]
    ids = args.problems.split(",") if args.problems else list(tasks.problems())
    jobs = []
    for pid in ids:
        problem = tasks.get(pid)
        if args.world_size not in problem.world_sizes:
            continue
        names = None if args.shapes == "all" else (
            [problem.default_shape.name] if args.shapes == "default" else [args.shapes])
        jobs.append((pid, names, tasks.reference_source(pid)))
    return jobs


def measure(problem: str, shapes: list[str] | None, code: str, budget_s: float, args) -> list[dict]:
    """One evaluation of the problem; a row per shape, each carrying the evaluation's wall time
    (and, with --watch, what the scheduler did to its players)."""
    t0 = time.perf_counter()
    with PlayerWatch() if args.watch else contextlib.nullcontext() as watch:
        try:  # a judge that fails (out of memory on a problem's inputs, say) ends this problem only
            doc = evaluate(EvaluationRequest(
                problem=problem, solution_code=code, world_size=args.world_size, mode=args.mode,
                shapes=shapes, dims=args.dims, pkb_root=args.pkb_root, trials=args.trials,
                warmup=args.warmup, iters=args.iters, timeout_s=args.timeout, timing_budget_s=budget_s,
                batch_order=args.batch_order, batch_target_ms=args.batch_target_ms,
            ))  # fmt: skip
        except EvaluatorError as exc:
            doc = {"status": "evaluator_error", "reason": str(exc), "shapes": []}
    wall_s = time.perf_counter() - t0
    base = {"problem": problem, "status": doc["status"], "reason": doc["reason"], "wall_s": wall_s, "budget_s": budget_s}
    if watch is not None:
        base["players"], base["busiest_threads"] = watch.summary(), watch.busiest_threads()
    if not doc["shapes"]:
        return [{**base, "shape": ",".join(shapes) if shapes else "all"}]
    rows = []
    for s in doc["shapes"]:
        row = {**base, "shape": s["name"]}
        if doc["status"] == "correct" and s["speedup"] is not None:
            low, high = s["speedup_interval"] or (None, None)  # none: the shape's note says why
            run = s["timing_run"]
            row.update(reference_us=s["reference"]["time_us"], speedup=s["speedup"], low=low, high=high,
                       pairs=run["pairs"], stop=run["stop"], calls=run["calls_per_batch"], timing_s=run["seconds"],
                       by_order=by_order(run["pairs_us"]), pairs_us=run["pairs_us"], allocator=run.get("allocator"))
        rows.append(row)
    return rows


def by_order(pairs_us: list[list[float]]) -> tuple[float | None, float | None]:
    """The median speedup of the pairs that ran the reference first (even pairs), and of those that
    ran the solution first: identical code reads 1.0 in both unless the order itself costs time."""

    def median_ratio(pairs: list[list[float]]) -> float | None:
        ratios = [ref / sol for ref, sol in pairs if sol > 0]
        return statistics.median(ratios) if ratios else None

    return median_ratio(pairs_us[0::2]), median_ratio(pairs_us[1::2])


def _holds(row: dict) -> bool:
    return row["low"] <= 1.0 <= row["high"]


def report(rows: list[dict], fixed: dict, console: Console) -> None:
    table = Table(title="reference against an identical copy of itself")
    for col in ("problem", "shape", "status", "reference us", "speedup", "95% interval", "holds 1",
                "reference first / second", "pairs", "problem wall s", "fixed wall s"):
        table.add_column(col, justify="left" if col in ("problem", "shape", "status") else "right")
    for r in rows:
        f = fixed.get((r["problem"], r["shape"]))
        fixed_wall = f"{f['wall_s']:.1f}" if f else "-"
        if "speedup" not in r:
            table.add_row(r["problem"], r["shape"], r["status"], "", "", "", "", "", "", f"{r['wall_s']:.1f}", fixed_wall)
            continue
        bounded = r["low"] is not None
        interval, holds = (f"{r['low']:.3f}-{r['high']:.3f}", "yes" if _holds(r) else "[red]no") if bounded else (
            "unbounded", "[red]-")
        table.add_row(
            r["problem"], r["shape"], r["status"], f"{r['reference_us']:.1f}", f"{r['speedup']:.3f}",
            interval, holds, " / ".join("-" if v is None else f"{v:.3f}" for v in r["by_order"]),
            f"{r['pairs']} {r['stop']}", f"{r['wall_s']:.1f}", fixed_wall,
        )
    console.print(table)
    timed = [r for r in rows if "speedup" in r]
    if timed:
        off = [abs(r["speedup"] - 1) for r in timed]
        bounded = [r for r in timed if r["low"] is not None]
        half = [max(r["speedup"] - r["low"], r["high"] - r["speedup"]) / r["speedup"] for r in bounded] or [float("nan")]
        console.print(
            f"{len(timed)} timed: |speedup - 1| median {100 * statistics.median(off):.1f}%, worst {100 * max(off):.1f}%; "
            f"interval half-width median {100 * statistics.median(half):.1f}%, worst {100 * max(half):.1f}%; "
            f"intervals without 1.0: {sum(not _holds(r) for r in bounded)}, unbounded: {len(timed) - len(bounded)}; "
            f"point estimates outside [0.97, 1.03]: {sum(d > 0.03 for d in off)}"
        )
    if fixed:
        pairs = [(r["wall_s"], fixed[(r["problem"], r["shape"])]["wall_s"]) for r in rows
                 if (r["problem"], r["shape"]) in fixed]
        ratios = [a / b for a, b in pairs]
        console.print(f"wall time adaptive / fixed: median {statistics.median(ratios):.2f}x, worst {max(ratios):.2f}x; "
                      f"total {sum(a for a, _ in pairs):.0f} s / {sum(b for _, b in pairs):.0f} s")
    for r in rows:
        if r["status"] != "correct":
            console.print(f"[red]{r['problem']} {r['shape']}: {r['status']}: {escape(r['reason'])}")
    for r in rows:
        if note := allocator_note(r.get("allocator")):
            console.print(f"{r['problem']} {r['shape']}: {note}")


def report_players(rows: list[dict], console: Console) -> None:
    """Per evaluation (its first shape's row), each player's CPU and scheduling record beside the
    speedups: a side that read slow because it waited for CPUs shows it here."""
    table = Table(title="players: CPU s / runqueue wait s / involuntary switches / minor faults / CPUs seen on")
    for col in ("problem", "run", "speedups", "reference players", "solution players"):
        table.add_column(col)
    firsts: dict[tuple, dict] = {}  # (problem, run) -> that evaluation's first row
    for r in rows:
        if "players" in r:
            firsts.setdefault((r["problem"], r.get("run")), r)
    for key, r in firsts.items():
        speedups = " ".join(f"{x['speedup']:.3f}" for x in rows
                            if (x["problem"], x.get("run")) == key and "speedup" in x)
        cells = {side: "; ".join(f"r{p['rank']} {p['run_s']:.1f}/{p['wait_s']:.2f}/{p['involuntary']}/{p['minor_faults']} cpu{p['cpus']}"
                                 for p in r["players"] if p["side"] == side) for side in (Side.REFERENCE, Side.SOLUTION)}
        table.add_row(r["problem"], str(r.get("run", 1)), speedups, cells[Side.REFERENCE], cells[Side.SOLUTION])
    console.print(table)
    for r in firsts.values():
        console.print(f"busiest threads, {r['problem']} run {r.get('run', 1)} ({r['wall_s']:.1f} s wall):")
        for t in r["busiest_threads"]:
            console.print(f"  {t['cpu_s']:6.1f} s  cpus {t['cpus']}  {escape(t['thread'])}  in  {escape(t['process'])}")


def report_repeats(rows: list[dict], console: Console) -> None:
    """Per shape judged in several evaluations: how far the evaluations' point estimates spread,
    against the width of one evaluation's interval. An offset that holds for a whole evaluation
    (its processes) shows as a spread wider than the intervals, and as intervals that miss the
    evaluations' pooled median."""
    table = Table(title="the same shape in fresh evaluations")
    for col in ("problem", "shape", "runs", "speedups", "spread", "median half-width", "intervals holding the pooled median"):
        table.add_column(col, justify="left" if col in ("problem", "shape", "speedups") else "right")
    shapes: dict[tuple[str, str], list[dict]] = {}
    for r in rows:
        if "speedup" in r:
            shapes.setdefault((r["problem"], r["shape"]), []).append(r)
    for (problem, shape), runs in shapes.items():
        pooled = statistics.median(r["speedup"] for r in runs)
        bounded = [r for r in runs if r["low"] is not None]
        half = [(r["high"] - r["low"]) / 2 / r["speedup"] for r in bounded]
        spread = max(r["speedup"] for r in runs) / min(r["speedup"] for r in runs) - 1
        table.add_row(problem, shape, str(len(runs)), " ".join(f"{r['speedup']:.3f}" for r in runs),
                      f"{100 * spread:.1f}%", f"{100 * statistics.median(half):.1f}%" if half else "-",
                      f"{sum(r['low'] <= pooled <= r['high'] for r in bounded)} of {len(bounded)}")
    console.print(table)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mode", default="gpu", choices=["cpu", "shared-gpu", "gpu"])
    parser.add_argument("--world-size", type=int, default=1)
    parser.add_argument("--problems", help="comma-separated ids (public numbers with --pkb-root); default: all")
    parser.add_argument("--shapes", default="all", help="'all', 'default', or one shape name")
    parser.add_argument("--pkb-root", help="a public-suite checkout: judge its references (with --problems)")
    parser.add_argument("--dims", type=lambda v: dict(zip("MN", map(int, v.split(",")))), help="M,N with --pkb-root")
    parser.add_argument("--trials", type=int, default=1)
    parser.add_argument("--warmup", type=int, default=100)
    parser.add_argument("--iters", type=int, default=100)
    parser.add_argument("--budget", type=float, default=DEFAULT_TIMING_BUDGET_S, help="timing budget per shape, s")
    parser.add_argument("--batch-order", default=BatchOrder.SYMMETRIC, choices=[o.value for o in BatchOrder],
                        help="the timed pairs' order (a diagnostic: only the default is fair)")
    parser.add_argument("--batch-target-ms", type=float, default=0.0,
                        help="on a GPU, how long the faster side's timed batch lasts (a diagnostic; 0: the judge's)")
    parser.add_argument("--compare-fixed", action="store_true", help="also time each with the fixed schedule")
    parser.add_argument("--timeout", type=float, default=300)
    parser.add_argument("--repeat", type=int, default=1,
                        help="judge each problem this many times, each a fresh evaluation with new processes")
    parser.add_argument("--watch", action="store_true",
                        help="record what the scheduler did to each player (bench/player_watch.py)")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--resume", action="store_true",
                        help="keep what --json holds and judge only what it lacks: a suite longer than one session")
    args = parser.parse_args()
    if args.pkb_root and not args.problems:
        parser.error("--pkb-root needs --problems")
    if args.resume and not args.json:
        parser.error("--resume needs --json")
    jobs = _jobs(args)
    rows: list[dict] = []
    fixed: dict = {}
    if args.resume and args.json.exists():
        kept = json.loads(args.json.read_text())
        rows = kept["adaptive"]
        fixed = {(r["problem"], r["shape"]): r for r in kept["fixed"]}

    def save() -> None:  # after every evaluation: a long run cut short keeps what it measured
        if args.json:
            args.json.write_text(json.dumps({"adaptive": rows, "fixed": list(fixed.values())}, indent=1))

    done = {(r["problem"], r.get("run", 1)) for r in rows}
    runs = [(run, job) for job in jobs for run in range(1, args.repeat + 1) if (job[0], run) not in done]
    for run, (p, shapes, code) in track(runs, description=f"{args.mode}, world {args.world_size}"):
        rows += [{**row, "run": run} for row in measure(p, shapes, code, args.budget, args)]
        save()
    if args.compare_fixed:
        fixed_done = {problem for problem, _shape in fixed}
        for p, shapes, code in track([j for j in jobs if j[0] not in fixed_done], description="fixed schedule"):
            for row in measure(p, shapes, code, 0.0, args):
                fixed[(row["problem"], row["shape"])] = row
            save()
    console = Console(width=160)
    report(rows, fixed, console)
    if args.repeat > 1:
        report_repeats(rows, console)
    if args.watch:
        report_players(rows, console)
    sys.exit(0 if all(r["status"] == "correct" for r in rows) else 1)


if __name__ == "__main__":
    main()
