"""`python -m evaluator run|problems|selfcheck|table`.

Exit codes: 0 the solution is correct; 1 the solution failed (any other status); 2 bad usage;
3 the evaluator or host broke.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from evaluator.results import InvalidResult, Mode, Result, Status, allocator_note

EXIT_CORRECT, EXIT_FAILED, EXIT_USAGE, EXIT_BROKEN = 0, 1, 2, 3
MODES = [m.value for m in Mode]


def _dims(text: str) -> dict[str, int]:
    """"M=64,N=128" or, for public-suite problems, "64,128" (M, N)."""
    parts = [p.strip() for p in text.split(",") if p.strip()]
    if all("=" in p for p in parts):
        return {k.strip(): int(v) for k, v in (p.split("=", 1) for p in parts)}
    if len(parts) == 2:
        return {"M": int(parts[0]), "N": int(parts[1])}
    raise argparse.ArgumentTypeError("use NAME=INT,... or M,N")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m evaluator", description="Judge multi-GPU kernels.")
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="evaluate a solution file against a problem")
    run.add_argument("--problem", required=True, help="suite id, or public-suite number with --pkb-root")
    run.add_argument("--solution", required=True, type=Path)
    run.add_argument("--world-size", type=int, default=2)
    run.add_argument("--mode", choices=MODES, default=Mode.CPU.value)
    run.add_argument("--hardware", help="roofline profile (h100, h200, b200); detected on GPUs")
    run.add_argument(
        "--shape", action="append", dest="shapes",
        help="shape name (repeatable); default: all, in cpu mode the problem's default shape",
    )  # fmt: skip
    run.add_argument("--dims", type=_dims, help="a custom shape, e.g. M=64,N=128 (or M,N for --pkb-root)")
    run.add_argument("--warmup", type=int, help="warm-up calls per side; default 500, in cpu mode 3")
    run.add_argument("--iters", type=int, help="the fewest timed calls per side; default 100, in cpu mode 10")
    run.add_argument("--timing-budget", type=float, dest="timing_budget_s",
                     help="seconds per shape for more timed calls while the speedup's 95%% interval is wider "
                          "than +-1%%; 0 for exactly --iters calls; default 2")
    run.add_argument("--trials", type=int, help="correctness trials per shape; default 5, in cpu mode 3")
    run.add_argument("--timeout", type=float, default=600.0, help="hard limit for the whole evaluation, seconds")
    run.add_argument("--pkb-root", help="a ParallelKernelBench checkout to take the problem from")
    run.add_argument("--json", type=Path, help="write the result document here")
    run.add_argument("--quiet", action="store_true", help="no progress display")
    run.add_argument(
        "--unsandboxed", action="store_true",
        help="judge your own file where no sandbox can be set up: the players run without namespaces "
             "(same limits and clean-up), and the result says so",
    )  # fmt: skip

    problems = sub.add_parser("problems", help="list the suite's problems")
    problems.add_argument("--json", action="store_true")
    problems.add_argument("--markdown", action="store_true", help="the docs table with rooflines per hardware")

    check = sub.add_parser("selfcheck", help="references as their own solutions, and perturbed copies")
    check.add_argument("--problems", help="comma-separated ids; default: all")
    check.add_argument("--world-size", type=int, default=2)
    check.add_argument("--mode", choices=MODES, default=Mode.CPU.value)
    check.add_argument("--shape", help="shape name, or 'default' for each problem's default shape; default: each problem's first (smallest)")
    check.add_argument("--trials", type=int, default=2)
    check.add_argument("--timeout", type=float, default=900.0)
    check.add_argument("--seed", type=int, help="base of the trials' seeds, to run a reported draw again; default: random")
    check.add_argument("--json", type=Path)
    return parser


def request_from_args(args, code: str, console: Console):
    """The evaluation the command line asks for; in cpu mode, what it leaves unset comes from
    CPU_DEFAULTS, as on the platform's CPU workers."""
    import tasks
    from evaluator.launch import CPU_DEFAULTS, EvaluationRequest

    settings = {"warmup": args.warmup, "iters": args.iters, "trials": args.trials, "timing_budget_s": args.timing_budget_s}
    shapes = args.shapes
    if args.mode == Mode.CPU:
        settings = {k: CPU_DEFAULTS.get(k) if v is None else v for k, v in settings.items()}
        if shapes is None and args.dims is None and not args.pkb_root:
            shapes = [tasks.get(args.problem).default_shape.name]
            if not args.quiet:
                console.print(f"cpu mode: shape {shapes[0]} only, {settings['iters']} timed calls (--shape, --iters for more)")
    settings = {k: v for k, v in settings.items() if v is not None}
    return EvaluationRequest(
        problem=args.problem, solution_code=code, world_size=args.world_size, mode=args.mode,
        hardware=args.hardware, shapes=shapes, dims=args.dims, timeout_s=args.timeout, pkb_root=args.pkb_root,
        sandboxed=not args.unsandboxed, **settings,
    )


def cmd_run(args, console: Console) -> int:
    from evaluator.launch import EvaluatorError, NoSandbox, evaluate

    try:
        code = args.solution.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        console.print(f"[red]cannot read {args.solution}: {exc}")
        return EXIT_USAGE
    try:
        req = request_from_args(args, code, console)
    except KeyError as exc:
        console.print(f"[red]{exc}")
        return EXIT_USAGE
    try:
        with Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(),
                      console=console, transient=True, disable=args.quiet) as bar:
            task = bar.add_task("starting ranks", total=None)

            def on_progress(stage: str, detail: dict) -> None:
                shape = f" [{detail['shape']}]" if "shape" in detail else ""
                bar.update(task, description=f"{stage}{shape}")

            doc = evaluate(req, on_progress)
    except InvalidResult as exc:  # a ValueError, but the evaluator's own fault
        console.print(f"[red]evaluator error: invalid result document: {escape(str(exc))}")
        return EXIT_BROKEN
    except ValueError as exc:
        console.print(f"[red]{exc}")
        return EXIT_USAGE
    except NoSandbox as exc:
        console.print(f"[red]{escape(str(exc))}")
        console.print("--unsandboxed judges your own file anyway, without the sandbox (the result says so)")
        return EXIT_BROKEN
    except (EvaluatorError, KeyError) as exc:
        console.print(f"[red]evaluator error: {exc}")
        return EXIT_BROKEN if isinstance(exc, EvaluatorError) else EXIT_USAGE
    if args.json:
        args.json.write_text(json.dumps(doc, indent=1))
    result = Result.from_dict(doc)
    print_summary(result, console)
    return EXIT_CORRECT if result.status == Status.CORRECT else EXIT_FAILED


def print_summary(result: Result, console: Console) -> None:
    colour = "green" if result.status == Status.CORRECT else "red"
    console.print(f"[bold {colour}]{result.status}[/]  {result.problem}  mode={result.mode}  world={result.world_size}"
                  f"  hardware={result.hardware or '-'}")
    if not result.environment["sandboxed"]:
        console.print("[yellow]judged without the sandbox (--unsandboxed): not a result the platform would accept")
    if result.reason:
        console.print(result.reason)
    table = Table(title=None if result.timings_meaningful else "timings NOT meaningful in this mode")
    for col in ("shape", "dims", "correct", "solution us", "reference us", "speedup", "95% interval", "pairs",
                "T_roof us", "bound", "util"):
        table.add_column(col, justify="right")

    def f(v, fmt="{:.1f}"):
        return "-" if v is None else fmt.format(v)

    for s in result.shapes:
        sol, ref, roof, run = s.solution, s.reference, s.roofline, s.timing_run
        interval = "-" if s.speedup_interval is None else "{:.3f}-{:.3f}".format(*s.speedup_interval)
        table.add_row(
            s.name, ",".join(f"{k}={v}" for k, v in s.dims.items()), f(s.correct, "{}"),
            f(sol and sol.time_us), f(ref and ref.time_us), f(s.speedup, "{:.3f}x"), interval,
            f"{run.pairs} ({run.stop})" if run else "-",
            f(roof and roof.t_roof_us, "{:.2f}"), roof.bound if roof else "-", f(roof and roof.utilization, "{:.1%}"),
        )
    console.print(table)
    for shape in result.to_dict()["shapes"]:
        if note := allocator_note((shape["timing_run"] or {}).get("allocator")):
            console.print(f"{shape['name']}: {note}")
    stages = ", ".join(f"{k} {v:.1f}s" for k, v in result.stages.items() if v is not None)
    console.print(f"[dim]stages: {stages}")


def cmd_problems(args, console: Console) -> int:
    import tasks

    problems = tasks.problems()
    if args.markdown:
        from evaluator.catalog import markdown_table

        print(markdown_table(problems.values()), end="")
        return EXIT_CORRECT
    if args.json:
        from evaluator.catalog import problem_dict

        print(json.dumps([problem_dict(p) for p in problems.values()], indent=1))
        return EXIT_CORRECT
    table = Table()
    for col in ("id", "pkb", "level", "parallelism", "default shape", "world sizes", "tolerance"):
        table.add_column(col)
    for p in problems.values():
        tol = p.tolerance if not isinstance(p.tolerance, tuple) else p.tolerance[0]
        table.add_row(p.id, str(p.pkb_id or "-"), str(p.level), p.parallelism, p.default_shape.label(),
                      ",".join(map(str, p.world_sizes)), tol.describe())
    console.print(table)
    return EXIT_CORRECT


def cmd_selfcheck(args, console: Console) -> int:
    import tasks
    from evaluator.launch import EvaluatorError
    from evaluator.selfcheck import run_selfcheck

    ids = args.problems.split(",") if args.problems else list(tasks.problems())
    try:
        with console.status(f"checking {len(ids)} problems at world {args.world_size}"):
            report = run_selfcheck(ids, args.world_size, args.mode, args.shape, args.trials, args.timeout, args.seed)
    except EvaluatorError as exc:
        console.print(f"[red]evaluator error: {exc}")
        return EXIT_BROKEN
    except (KeyError, ValueError) as exc:
        console.print(f"[red]{escape(str(exc.args[0] if exc.args else exc))}")  # KeyError's str() adds quotes
        return EXIT_USAGE
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))
    table = Table()
    for col in ("problem", "reference as solution", "perturbed copy", "note"):
        table.add_column(col)
    ok = True
    for pid, row in report["problems"].items():
        skipped = row["reference"] == "skipped"
        good = skipped or (row["reference"] == Status.CORRECT and row["perturbed"] == Status.INCORRECT)
        ok &= good
        table.add_row(pid, row["reference"], row["perturbed"], escape(row.get("reason", "")[:100]),
                      style="dim" if skipped else None if good else "red")
    console.print(table)
    console.print(f"seed {report['seed']} (--seed {report['seed']} draws the same inputs again)")
    if report.get("error"):
        console.print(f"[red]{escape(report['error'])}")
        ok = False
    return EXIT_CORRECT if ok else EXIT_FAILED


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    console = Console(stderr=False)
    handler = {"run": cmd_run, "problems": cmd_problems, "selfcheck": cmd_selfcheck}[args.command]
    return handler(args, console)


if __name__ == "__main__":
    sys.exit(main())
