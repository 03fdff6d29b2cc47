"""Dispatch throughput and exactly-once delivery with real processes in cpu mode.

    python bench/dispatch_throughput.py                       # 200 submissions, 2 queues, 4 workers,
                                                              # then 1, 2 and 4 workers on one queue
    python bench/dispatch_throughput.py --submissions 40 --scaling 1,2 --scaling-submissions 12

Needs PostgreSQL and RabbitMQ on their local ports (or PKB_TEST_POSTGRES_URL / PKB_TEST_RABBITMQ_URL).
Each run uses its own database cloned from a migrated template, its own queues and processes
(the integration tests' harness, tests/integration/pkb_stack.py). A cpu-mode evaluation starts
its rank processes (each imports torch) and runs the default shape once: on a small machine the
rank start-up, not dispatch, bounds throughput, so the figures say how the dispatch scales on
this host's cores.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "integration"))

import pkb_stack  # noqa: E402


def run(template: str, tmp: Path, broker: str, queues: int, workers: int, submissions: int, code: str) -> dict:
    stack = pkb_stack.Stack(tmp, broker, pkb_stack.clone_database(template))
    try:
        slugs = [stack.hardware_slug(chr(ord("a") + i)) for i in range(queues)]
        stack.setup(slugs)
        web = stack.web_worker(concurrency=2)
        gpu = [stack.gpu_worker(slugs[i % queues], f"gpu{i}") for i in range(workers)]
        for proc in [web, *gpu]:
            stack.wait_ready(proc)
        started = time.monotonic()
        ids = stack.submit(slugs, code, count=submissions)
        submitted = time.monotonic() - started
        rows = stack.wait_finished(ids, timeout=60 + 30 * submissions)
        elapsed = time.monotonic() - started
        stored = stack.stored_counts()
        outcome = {
            "queues": queues,
            "workers": workers,
            "submissions": submissions,
            "seconds": round(elapsed, 1),
            "submit_seconds": round(submitted, 1),
            "per_minute": round(60 * submissions / elapsed, 1),
            "states": dict(Counter(r["state"] for r in rows.values())),
            "statuses": dict(Counter(r["status"] for r in rows.values())),
            "stored_once": sum(1 for i in ids if stored[i] == 1),
            "stored_twice_or_more": sum(1 for i in ids if stored[i] > 1),
            "attempts": dict(Counter(r["attempts"] for r in rows.values())),
            "per_worker": dict(Counter(r["worker"].split("@")[0] for r in rows.values())),
        }
        return outcome
    finally:
        stack.close()
        pkb_stack.drop_database(stack.database)
        stack.remove_queues()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--broker", default=pkb_stack.RABBITMQ_URL)
    parser.add_argument("--submissions", type=int, default=200, help="0 skips the exactly-once run")
    parser.add_argument("--queues", type=int, default=2)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--scaling", default="1,2,4", help="worker counts on one queue; empty to skip")
    parser.add_argument("--scaling-submissions", type=int, default=24)
    parser.add_argument(
        "--sleep",
        type=float,
        default=0,
        help="the solution sleeps this long when loaded, on every rank: evaluations that wait rather "
        "than compute, to see the dispatch scale past this host's cores",
    )
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()

    code = pkb_stack.SLOW_SOLUTION.format(seconds=args.sleep) if args.sleep else pkb_stack.CORRECT_SOLUTION
    template = f"pkb_bench_template_{os.getpid()}"
    results = {"host": {"cores": os.cpu_count(), "load_before": os.getloadavg()}, "sleep": args.sleep, "runs": []}
    with tempfile.TemporaryDirectory(prefix="pkb-bench-") as tmp_dir:
        tmp = Path(tmp_dir)
        pkb_stack.create_template(template, tmp / "template")
        try:
            plan = [(args.queues, args.workers, args.submissions)] if args.submissions else []
            plan += [(1, int(w), args.scaling_submissions) for w in args.scaling.split(",") if w.strip()]
            for i, (queues, workers, submissions) in enumerate(plan):
                outcome = run(template, tmp / f"run{i}", args.broker, queues, workers, submissions, code)
                results["runs"].append(outcome)
                print(json.dumps(outcome), flush=True)
        finally:
            pkb_stack.drop_database(template)
    results["host"]["load_after"] = os.getloadavg()
    print()
    print(f"{'queues':>6} {'workers':>7} {'subs':>5} {'seconds':>8} {'per min':>8} {'exactly once':>13}")
    for r in results["runs"]:
        once = f"{r['stored_once']}/{r['submissions']}"
        print(
            f"{r['queues']:>6} {r['workers']:>7} {r['submissions']:>5} {r['seconds']:>8} {r['per_minute']:>8} {once:>13}"
        )
    print(f"host: {results['host']}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0 if all(r["stored_once"] == r["submissions"] for r in results["runs"]) else 1


if __name__ == "__main__":
    sys.exit(main())
