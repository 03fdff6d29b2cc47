"""Fidelity to the public suite, from a checkout of it (never copied into the project):

- `namesakes`: each of our problems named after a public problem judges that problem's public
  reference, submitted unchanged as a solution, on our inputs: it must come out `correct`;
- `public`: each public reference judged against itself on the public suite's own inputs
  (`--pkb-root`, base shape --dims): the evaluator must run the public layout as it is.

    python bench/public_fidelity.py --pkb-root CHECKOUT namesakes --mode cpu --world-size 2
    python bench/public_fidelity.py --pkb-root CHECKOUT public --mode cpu --world-size 2 --dims 64,64

Prints one row per problem (status, the reason when not correct, wall time) and the count.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rich.console import Console  # noqa: E402
from rich.markup import escape  # noqa: E402
from rich.progress import track  # noqa: E402
from rich.table import Table  # noqa: E402

import tasks  # noqa: E402
from evaluator.launch import EvaluationRequest, EvaluatorError, evaluate  # noqa: E402
from evaluator.loading import pkb_reference_file  # noqa: E402


def jobs(args) -> list[tuple[str, dict]]:
    """(label, the evaluation request's arguments) per problem."""
    root = Path(args.pkb_root)
    common = dict(world_size=args.world_size, mode=args.mode, trials=args.trials, timeout_s=args.timeout,
                  timing_budget_s=0, warmup=1, iters=2)
    out = []
    if args.what == "namesakes":
        for problem in tasks.problems().values():
            if problem.pkb_id is None or args.world_size not in problem.world_sizes:
                continue
            if args.problems and str(problem.pkb_id) not in args.problems.split(","):
                continue
            try:
                path = pkb_reference_file(root, problem.pkb_id)
            except FileNotFoundError:
                continue  # not in this checkout of the public suite
            out.append((f"{problem.pkb_id} {problem.id}", dict(problem=problem.id, solution_code=path.read_text(),
                                                             shapes=[args.shape or problem.shapes[0].name], **common)))
    else:
        numbers = sorted(int(p.name.split("_")[0]) for p in root.glob("reference/[0-9]*_*.py"))
        for number in numbers:
            if args.problems and str(number) not in args.problems.split(","):
                continue
            path = pkb_reference_file(root, number)
            out.append((path.stem, dict(problem=str(number), solution_code=path.read_text(), pkb_root=str(root),
                                        dims=args.dims, **common)))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("what", choices=["namesakes", "public"])
    parser.add_argument("--pkb-root", required=True, help="a checkout of the public suite")
    parser.add_argument("--mode", default="cpu", choices=["cpu", "shared-gpu", "gpu"])
    parser.add_argument("--world-size", type=int, default=2)
    parser.add_argument("--problems", help="comma-separated public numbers; default: all")
    parser.add_argument("--shape", help="our shape to judge namesakes on; default: each problem's first")
    parser.add_argument("--dims", type=lambda v: dict(zip("MN", map(int, v.split(",")))), default={"M": 64, "N": 64},
                        help="M,N base shape for `public`")
    parser.add_argument("--trials", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=400)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()

    rows = []
    for label, request in track(jobs(args), description=f"{args.what} ({args.mode}, W={args.world_size})"):
        t0 = time.perf_counter()
        try:  # a judge that fails (out of memory on a problem's inputs, say) ends this problem only
            doc = evaluate(EvaluationRequest(**request))
        except EvaluatorError as exc:
            doc = {"status": "evaluator_error", "reason": str(exc)}
        rows.append({"problem": label, "status": doc["status"], "reason": doc.get("reason") or "",
                     "wall_s": round(time.perf_counter() - t0, 1)})
        if args.json:  # after every problem: a run cut short keeps what it measured
            args.json.write_text(json.dumps(rows, indent=1))

    console = Console(width=200)
    table = Table(title=f"{args.what}: mode {args.mode}, world {args.world_size}")
    for column in ("problem", "status", "wall s", "reason"):
        table.add_column(column)
    for row in rows:
        table.add_row(row["problem"], row["status"], f"{row['wall_s']:.1f}", escape(row["reason"][:150]))
    console.print(table)
    correct = sum(row["status"] == "correct" for row in rows)
    console.print(f"{correct} of {len(rows)} correct")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
