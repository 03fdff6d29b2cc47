"""Rank stability: a set of submissions of known, distinct speeds (evaluator/calibration.py: the
reference followed by waits of several lengths, and the reference called several times per call)
judged on one problem in complete runs, one after the other. Prints each submission's speedup and
interval per run and Kendall's tau between every two runs' orders by speedup (1.0: the same
order), and between each run and the order the submissions have by construction.

    python bench/rank_stability.py --mode cpu --world-size 2 --problem allgather --waits 0,2000,5000,10000,20000
    python bench/rank_stability.py --mode gpu --world-size 1 --problem fp8_reduce_scatter_grads --shape large --waits 0 --repeats 2,3,4,5
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rich.console import Console  # noqa: E402
from rich.progress import Progress  # noqa: E402
from rich.table import Table  # noqa: E402

import tasks  # noqa: E402
from evaluator import calibration  # noqa: E402
from evaluator.launch import DEFAULT_TIMING_BUDGET_S, EvaluationRequest, evaluate  # noqa: E402


def kendall_tau(a: list[float], b: list[float]) -> float:
    """Kendall's tau-a of two scorings of the same items: (concordant - discordant pairs) / pairs."""
    pairs = list(itertools.combinations(range(len(a)), 2))
    if not pairs:
        raise ValueError("need at least two items")
    score = 0
    for i, j in pairs:
        product = (a[i] - a[j]) * (b[i] - b[j])
        score += (product > 0) - (product < 0)
    return score / len(pairs)


def submissions(args) -> list[tuple[str, str, str, float]]:
    """(label, source, family, how slow by construction within the family: larger is slower). Wait 0
    is the reference's own source, unwrapped: on a GPU even a sleep of no length costs a launch."""
    subs = []
    for wait in [float(w) for w in args.waits.split(",") if w]:
        if wait == 0:
            subs.append(("reference", tasks.reference_source(args.problem), "waits", 0.0))
        else:
            subs.append((f"wait {wait:g} us", calibration.waiting(args.problem, wait), "waits", wait))
    for times in [int(t) for t in args.repeats.split(",") if t]:
        subs.append((f"called {times}x", calibration.repeated(args.problem, times), "repeats", float(times)))
    return subs


def construction_orders(subs: list[tuple[str, str, str, float]], ok: list[bool]) -> dict[str, list[tuple[int, float]]]:
    """Per family with two members or more: (index, slowness) of each judged member. The reference
    (no wait, called once) belongs to both families."""
    orders: dict[str, list[tuple[int, float]]] = {"waits": [], "repeats": []}
    for i, (_label, _code, family, slowness) in enumerate(subs):
        if not ok[i]:
            continue
        if family == "waits" and slowness == 0:
            orders["repeats"].append((i, 1.0))
        orders[family].append((i, slowness))
    return {family: members for family, members in orders.items() if len(members) >= 2}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--problem", default="allgather")
    parser.add_argument("--mode", default="cpu")
    parser.add_argument("--world-size", type=int, default=2)
    parser.add_argument("--shape", default="default")
    parser.add_argument("--waits", default="0,2000,5000,10000,20000", help="us per call; 0 is the reference itself")
    parser.add_argument("--repeats", default="", help="the reference called this many times per call, e.g. 2,3")
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--warmup", type=int, default=None)
    parser.add_argument("--iters", type=int, default=None)
    parser.add_argument("--trials", type=int, default=1)
    parser.add_argument("--timing-budget", type=float, default=DEFAULT_TIMING_BUDGET_S)
    parser.add_argument("--json", help="write every run's figures here")
    args = parser.parse_args()
    subs = submissions(args)
    if len(subs) < 2:
        parser.error("need at least two submissions")
    settings = {"trials": args.trials, "timing_budget_s": args.timing_budget}
    settings.update({k: v for k, v in (("warmup", args.warmup), ("iters", args.iters)) if v is not None})
    runs: list[list[dict]] = []
    started = time.perf_counter()
    with Progress(console=Console(stderr=True)) as progress:
        task = progress.add_task("judging", total=args.runs * len(subs))
        for _ in range(args.runs):
            row = []
            for label, code, _family, _slowness in subs:
                t0 = time.perf_counter()
                doc = evaluate(EvaluationRequest(problem=args.problem, solution_code=code, world_size=args.world_size,
                                                 mode=args.mode, shapes=[args.shape], **settings))
                summary = doc["summary"]
                row.append({"label": label, "status": doc["status"], "speedup": summary.get("speedup"),
                            "interval": summary.get("speedup_interval"), "wall_s": time.perf_counter() - t0})
                progress.advance(task)
            runs.append(row)
    console = Console()
    table = Table(title=f"{args.problem} ({args.shape}), {args.mode} mode, world {args.world_size}")
    table.add_column("submission")
    for r in range(args.runs):
        table.add_column(f"run {r + 1} speedup [95%]", justify="right")
    for i, (label, _code, _family, _slowness) in enumerate(subs):
        cells = []
        for row in runs:
            e = row[i]
            if e["status"] != "correct" or e["speedup"] is None:
                cells.append(e["status"])
            else:
                low, high = e["interval"] or (float("nan"), float("nan"))
                cells.append(f"{e['speedup']:.3f} [{low:.3f}-{high:.3f}]")
        table.add_row(label, *cells)
    console.print(table)
    ok = [all(row[i]["speedup"] is not None for row in runs) for i in range(len(subs))]
    scored = [[row[i]["speedup"] for i in range(len(subs)) if ok[i]] for row in runs]
    for a, b in itertools.combinations(range(args.runs), 2):
        console.print(f"Kendall tau, run {a + 1} against run {b + 1}: {kendall_tau(scored[a], scored[b]):.3f}")
    for family, members in construction_orders(subs, ok).items():
        truth = [-s for _i, s in members]  # slower by construction: a lower speedup
        for r, row in enumerate(runs):
            console.print(f"Kendall tau, run {r + 1} against the {family}' order: "
                          f"{kendall_tau(truth, [row[i]['speedup'] for i, _s in members]):.3f}")
    console.print(f"{sum(len(r) for r in runs)} evaluations in {time.perf_counter() - started:.0f} s")
    if args.json:
        Path(args.json).write_text(json.dumps({"args": vars(args), "runs": runs}, indent=1))


if __name__ == "__main__":
    main()
