"""pkbcli's commands. Exit codes, for scripts:

0  every file was submitted and every evaluation finished correct (with --no-wait: submitted)
1  something failed: a file was skipped or refused, or an evaluation finished and is not correct
   (wrong answer, crash, compile error, timeout, rejected, or the platform could not run it)
2  bad usage, or the platform could not be used (unreachable, token refused, server error)
3  gave up waiting (--timeout) while evaluations were still queued or running, none failed
"""

from __future__ import annotations

import argparse
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

import requests
from rich.console import Console
from rich.live import Live
from rich.table import Table

import pkbcli
from pkbcli.client import ApiError, Client
from pkbcli.naming import parse_run_directory, parse_solution_file

FINISHED = ("done", "failed")
OK, FAILED, USAGE, UNFINISHED = 0, 1, 2, 3


class UsageError(Exception):
    pass


@dataclass
class Planned:
    path: Path
    problem: str
    backend: str
    model_tag: str


def plan(
    paths: list[Path], problems: list[dict], model: str | None, backend: str | None, problem: str | None
) -> tuple[list[Planned], list[str]]:
    """Which problem, backend and model each file is for; reasons for the files skipped."""
    by_slug = {p["slug"]: p["slug"] for p in problems}
    by_id = {p["pkb_id"]: p["slug"] for p in problems if p["pkb_id"] is not None}
    files = [f for p in paths for f in (sorted(p.rglob("*.py")) if p.is_dir() else [p])]
    planned, skipped = [], []
    for path in files:
        run = next((r for r in map(parse_run_directory, (d.name for d in path.parents)) if r), None)
        parsed = parse_solution_file(path)
        slug = problem or (parsed and (by_slug.get(parsed.name) or by_id.get(parsed.pkb_id)))
        if not slug:
            skipped.append(f"{path}: no problem (name it <id>_<name>_<backend>.py or pass --problem)")
            continue
        if slug not in by_slug:
            skipped.append(f"{path}: unknown problem {slug!r}")
            continue
        tag = model or (run.model if run else None)
        if not tag:
            skipped.append(f"{path}: no model tag (pass --model or use a solutions_..._<provider>_<model>/ folder)")
            continue
        planned.append(Planned(path, slug, backend or (parsed.backend if parsed else "cuda"), tag))
    return planned, skipped


def outputs_text(sub: dict) -> str:
    """Whether the submission's public-trial outputs were the same bits on every hardware it ran
    on (blank below two hardware with digests)."""
    outputs = sub.get("outputs") or {}
    if outputs.get("identical") is None:
        return ""
    if outputs["identical"]:
        return f"identical on {outputs['hardware']} hardware"
    return "differ: " + " | ".join(", ".join(group) for group in outputs["groups"])


def outcome(ev: dict) -> str:
    """ "correct", "failed" (finished, not correct: the script's failure) or "pending"."""
    if ev["state"] not in FINISHED:
        return "pending"
    return "correct" if ev["state"] == "done" and ev.get("status") == "correct" else "failed"


def state_text(ev: dict) -> str:
    if ev["state"] == "running":
        return f"running: {ev['stage']}"
    if ev["state"] == "queued":
        text = f"queued #{ev['queue_position']}" if ev.get("queue_position") else "queued"
        return text + (", no worker" if ev.get("workers") == [] else "")
    return ev["state"]


def progress_table(submissions: list[dict]) -> Table:
    """Every evaluation of every submission, nothing cut: cells too long for the terminal fold."""
    table = Table()
    for name in ("id", "problem", "model", "hardware", "state", "status", "speedup"):
        table.add_column(name, overflow="fold", justify="right" if name == "speedup" else "left")
    verdicts = [f"#{sub['id']} outputs {text}" for sub in submissions if (text := outputs_text(sub))]
    table.caption = "\n".join(verdicts) or None
    for sub in submissions:
        for ev in sub["evaluations"]:
            speedup = f"{ev['speedup']:.2f}x" if ev.get("speedup") else ""
            table.add_row(
                str(sub["id"]),
                sub["problem"],
                sub["model_tag"],
                ev["hardware"],
                state_text(ev),
                ev.get("status") or "",
                speedup,
            )
    return table


def reasons(submissions: list[dict]) -> list[str]:
    """Why each evaluation that has a reason failed (or is being retried), in full."""
    return [
        f"#{sub['id']} {sub['problem']} on {ev['hardware']}: {ev['reason']}"
        for sub in submissions
        for ev in sub["evaluations"]
        if ev.get("reason")
    ]


def print_results(console: Console, submissions: list[dict]) -> None:
    """The table, then each reason on lines of its own (the terminal wraps them, nothing is cut)."""
    console.print(progress_table(submissions))
    for line in reasons(submissions):
        console.print(line, highlight=False, markup=False)


def tally(submissions: list[dict]) -> dict[str, int]:
    counts = {"correct": 0, "failed": 0, "pending": 0}
    for sub in submissions:
        for ev in sub["evaluations"]:
            counts[outcome(ev)] += 1
    return counts


def exit_code(counts: dict[str, int], refused: int = 0, waited: bool = True) -> int:
    if refused or counts["failed"]:
        return FAILED
    if waited and counts["pending"]:
        return UNFINISHED
    return OK


def wait(client: Client, submissions: list[dict], console: Console, poll_s: float, timeout_s: float) -> list[dict]:
    """Poll until every evaluation finished or the timeout. On a terminal a live table; otherwise
    one line per evaluation as it finishes (logs of scripts and CI)."""
    deadline = time.monotonic() + timeout_s

    def poll() -> bool:
        if all(s["finished"] for s in submissions) or time.monotonic() >= deadline:
            return False
        time.sleep(poll_s)
        submissions[:] = [s if s["finished"] else client.submission(s["id"]) for s in submissions]
        return True

    if console.is_terminal:
        with Live(progress_table(submissions), console=console, refresh_per_second=2, transient=True) as live:
            while poll():
                live.update(progress_table(submissions))
        return submissions
    reported: set[int] = set()
    while True:
        for sub in submissions:
            for ev in sub["evaluations"]:
                if ev["state"] in FINISHED and ev["id"] not in reported:
                    reported.add(ev["id"])
                    status = ev.get("status") or ev["state"]
                    speedup = f" {ev['speedup']:.2f}x" if ev.get("speedup") else ""
                    console.print(
                        f"#{sub['id']} {sub['problem']} on {ev['hardware']}: {status}{speedup}", highlight=False
                    )
        if not poll():
            return submissions


def summary_line(counts: dict[str, int], refused: int, skipped: int) -> str:
    parts = [f"{counts['correct']} correct", f"{counts['failed']} failed"]
    if counts["pending"]:
        parts.append(f"{counts['pending']} unfinished")
    if refused:
        parts.append(f"{refused} refused")
    if skipped:
        parts.append(f"{skipped} skipped")
    return ", ".join(parts)


def public(sub: dict) -> dict:
    """A submission as --json prints it: the API's object without the code (the caller has the file)."""
    return {k: v for k, v in sub.items() if k != "code"}


def report(
    args, console: Console, submissions: list[dict], refused: list[dict], skipped: list[dict], waited: bool
) -> int:
    counts = tally(submissions)
    code = exit_code(counts, len(refused) + len(skipped), waited)
    if args.json:
        document = {
            "exit_code": code,
            "counts": counts,
            "submissions": [public(s) for s in submissions],
            "refused": refused,
            "skipped": skipped,
        }
        print(json.dumps(document, indent=2, default=str))
    else:
        if submissions:
            print_results(console, submissions)
        console.print(summary_line(counts, len(refused), len(skipped)), highlight=False)
    return code


def submit(args, console: Console) -> int:
    paths = [Path(p) for p in args.paths]
    missing = [str(p) for p in paths if not p.exists()]
    if missing:
        raise UsageError(f"no such file or directory: {', '.join(missing)}")
    client = Client(args.url, args.token)
    planned, skipped_reasons = plan(paths, client.problems(), args.model, args.backend, args.problem)
    skipped = [{"path": r.split(": ", 1)[0], "detail": r.split(": ", 1)[1]} for r in skipped_reasons]
    for reason in skipped_reasons:
        console.print(f"[yellow]skipped[/] {reason}")
    created, refused = [], []
    for n, item in enumerate(planned):
        payload = {
            "problem": item.problem,
            "model_tag": item.model_tag,
            "backend": item.backend,
            "code": item.path.read_text(encoding="utf-8", errors="surrogateescape"),
            "sample_index": args.sample_index,
            "run_label": args.run_label,
        }
        if args.hardware:
            payload["hardware"] = args.hardware
        try:
            sub = client.submit(**payload)
        except ApiError as e:
            if e.status in (401, 403) or e.status >= 500:  # every other file would fare the same
                raise
            if e.status == 429 and e.retry_after is not None:
                console.print(f"[red]rate limited[/] after {len(created)} submissions: {e.detail}")
                refused += [{"path": str(p.path), "detail": f"not sent: {e.detail}"} for p in planned[n:]]
                break
            console.print(f"[red]refused[/] {item.path}: {e.detail}")
            refused.append({"path": str(item.path), "detail": e.detail})
            continue
        created.append(sub)
        console.print(
            f"submitted {item.path} -> #{sub['id']} ({item.problem}, {item.model_tag}) "
            f"{args.url.rstrip('/')}{sub['url']}",
            highlight=False,
        )
    if args.wait and created:
        created = wait(client, created, console, args.poll, args.timeout)
    return report(args, console, created, refused, skipped, waited=args.wait)


def status(args, console: Console) -> int:
    client = Client(args.url, args.token)
    return report(args, console, [client.submission(i) for i in args.ids], [], [], waited=True)


def main(argv: list[str] | None = None) -> int:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--json", action="store_true", help="print one JSON document on stdout (messages go to stderr)")
    parser = argparse.ArgumentParser(
        prog="pkbcli",
        description=pkbcli.__doc__,
        epilog=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--url", default=os.environ.get("PKB_URL", "http://127.0.0.1:8000"), help="env PKB_URL")
    parser.add_argument("--token", default=os.environ.get("PKB_TOKEN", ""), help="env PKB_TOKEN (account page)")
    commands = parser.add_subparsers(dest="command", required=True)
    s = commands.add_parser("submit", parents=[common], help="submit files or directories of generated solutions")
    s.add_argument("paths", nargs="+")
    s.add_argument("--model", help="model tag (default: from the solutions_..._<provider>_<model> folder)")
    s.add_argument("--backend", choices=("cuda", "triton", "pytorch"), help="default: from the file name")
    s.add_argument("--problem", help="problem slug (default: from the <id>_<name>_<backend>.py file name)")
    s.add_argument("--hardware", action="append", help="hardware slug; repeat for several (default: the site's)")
    s.add_argument("--sample-index", type=int, default=0)
    s.add_argument("--run-label", default="")
    s.add_argument("--no-wait", dest="wait", action="store_false", help="return once submitted")
    s.add_argument("--poll", type=float, default=2.0, help="seconds between polls")
    s.add_argument("--timeout", type=float, default=3600.0, help="give up waiting after this many seconds")
    st = commands.add_parser("status", parents=[common], help="show submissions' evaluations")
    st.add_argument("ids", nargs="+", type=int)
    args = parser.parse_args(argv)
    # With --json, stdout carries the document only.
    console = Console(stderr=True) if args.json else Console()
    try:
        return {"submit": submit, "status": status}[args.command](args, console)
    except UsageError as e:
        console.print(f"[red]error[/] {e}")
        return USAGE
    except ApiError as e:
        console.print(f"[red]error[/] {e}")
        return USAGE
    except requests.RequestException as e:
        console.print(f"[red]error[/] cannot reach {args.url}: {e}")
        return USAGE
