from __future__ import annotations

import argparse
import os
import time
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.live import Live
from rich.table import Table

import pkbcli
from pkbcli.client import ApiError, Client
from pkbcli.naming import parse_run_directory, parse_solution_file

FINISHED = ("done", "failed")


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


def progress_table(submissions: list[dict]) -> Table:
    table = Table("submission", "problem", "model", "hardware", "state", "status", "speedup", "reason")
    verdicts = [f"#{sub['id']} outputs {text}" for sub in submissions if (text := outputs_text(sub))]
    table.caption = "\n".join(verdicts) or None
    for sub in submissions:
        for ev in sub["evaluations"]:
            state = ev["state"] if ev["state"] != "running" else f"running: {ev['stage']}"
            if ev["state"] == "queued" and ev.get("queue_position"):
                state = f"queued #{ev['queue_position']}"
            speedup = f"{ev['speedup']:.2f}x" if ev.get("speedup") else ""
            table.add_row(
                str(sub["id"]),
                sub["problem"],
                sub["model_tag"],
                ev["hardware"],
                state,
                ev.get("status") or "",
                speedup,
                (ev.get("reason") or "")[:60],
            )
    return table


def wait(client: Client, submissions: list[dict], console: Console, poll_s: float, timeout_s: float) -> list[dict]:
    deadline = time.monotonic() + timeout_s
    with Live(progress_table(submissions), console=console, refresh_per_second=2) as live:
        while not all(s["finished"] for s in submissions) and time.monotonic() < deadline:
            time.sleep(poll_s)
            submissions = [s if s["finished"] else client.submission(s["id"]) for s in submissions]
            live.update(progress_table(submissions))
    return submissions


def submit(args, console: Console) -> int:
    client = Client(args.url, args.token)
    planned, skipped = plan([Path(p) for p in args.paths], client.problems(), args.model, args.backend, args.problem)
    for reason in skipped:
        console.print(f"[yellow]skipped[/] {reason}")
    created, failures = [], 0
    for item in planned:
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
            if e.status in (401, 403):  # every other file would be refused the same way
                raise
            if e.status == 429 and e.retry_after is not None:
                console.print(f"[red]rate limited[/] after {len(created)} submissions: {e.detail}")
                break
            console.print(f"[red]rejected[/] {item.path}: {e.detail}")
            failures += 1
            continue
        created.append(sub)
        console.print(
            f"submitted {item.path} -> #{sub['id']} ({item.problem}, {item.model_tag}) "
            f"{args.url.rstrip('/')}{sub['url']}"
        )
    if args.wait and created:
        created = wait(client, created, console, args.poll, args.timeout)
    evaluations = [ev for s in created for ev in s["evaluations"]]
    if failures or not created or any(ev["state"] == "failed" for ev in evaluations):
        return 1
    return 0 if not args.wait or all(ev["state"] in FINISHED for ev in evaluations) else 3


def status(args, console: Console) -> int:
    client = Client(args.url, args.token)
    console.print(progress_table([client.submission(i) for i in args.ids]))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="pkbcli", description=pkbcli.__doc__)
    parser.add_argument("--url", default=os.environ.get("PKB_URL", "http://127.0.0.1:8000"), help="env PKB_URL")
    parser.add_argument("--token", default=os.environ.get("PKB_TOKEN", ""), help="env PKB_TOKEN (account page)")
    commands = parser.add_subparsers(dest="command", required=True)
    s = commands.add_parser("submit", help="submit files or directories of generated solutions")
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
    st = commands.add_parser("status", help="show submissions' evaluations")
    st.add_argument("ids", nargs="+", type=int)
    args = parser.parse_args(argv)
    console = Console()
    try:
        return {"submit": submit, "status": status}[args.command](args, console)
    except ApiError as e:
        console.print(f"[red]error[/] {e}")
        return 2
