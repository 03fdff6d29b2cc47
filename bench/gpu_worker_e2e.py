"""A GPU worker end to end on one GPU host with no services: the worker consumes a filesystem
broker, one CUDA submission is published to it as the web side would, and this script plays the
web side's worker (no Django, no database): it prints every progress message and the result.

    python bench/gpu_worker_e2e.py                      # the symmetric-memory all-gather example, gpu mode,
                                                        # one rank per visible GPU
    python bench/gpu_worker_e2e.py --world-size 1 --json result.json

Exit code 0 when the result came back and the solution is correct.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

HARDWARE = "e2e"
WEB_QUEUE = "web.e2e"


def visible_gpus() -> int:
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30, check=True)
    except (OSError, subprocess.SubprocessError):
        return 0
    devices = os.environ.get("CUDA_VISIBLE_DEVICES")
    found = len([line for line in out.stdout.splitlines() if line.startswith("GPU ")])
    return min(found, len(devices.split(","))) if devices else found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--problem", default="allgather")
    parser.add_argument("--solution", type=Path, default=REPO / "examples" / "solutions" / "allgather_symm_mem.py")
    parser.add_argument("--world-size", type=int, default=0, help="default: every visible GPU")
    parser.add_argument("--mode", default="gpu", choices=["gpu", "shared-gpu", "cpu"])
    parser.add_argument("--profile", default="h200", help="roofline profile (evaluator/hardware.toml)")
    parser.add_argument("--shape", action="append", dest="shapes", help="shape name (repeatable); default: all")
    parser.add_argument("--timeout", type=float, default=900.0, help="the evaluator's limit, seconds")
    parser.add_argument("--json", type=Path, help="write the result document here")
    args = parser.parse_args()
    world = args.world_size or visible_gpus()
    if world < 1:
        print("no GPU visible (nvidia-smi -L); pass --world-size and --mode to run anyway")
        return 2

    tmp = Path(tempfile.mkdtemp(prefix="pkb-gpu-e2e-"))
    os.environ.update(PKB_BROKER_URL="", PKB_BROKER_DIR=str(tmp / "broker"), PKB_WEB_QUEUE=WEB_QUEUE,
                      PKB_HEARTBEAT_S="5", PKB_BUILD_DIR=str(tmp / "builds"))  # fmt: skip
    from evaluator import sandbox, worker  # after the environment: worker reads the broker settings

    # Stopped by a signal, still clean up; orphaned rank processes come back to us to be killed.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    sandbox.become_subreaper()

    env = {k: v for k, v in os.environ.items() if k not in ("PKB_DATABASE_URL", "PKB_SECRET_KEY")}
    env["PYTHONPATH"] = str(REPO) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    log_path = tmp / "worker.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen([sys.executable, "-m", "evaluator.worker", "--hardware", HARDWARE], cwd=REPO, env=env,
                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip
    try:
        return judge(worker, args, world, proc, log_path)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        for pid in sandbox.descendants([os.getpid()]):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        print(f"worker log: {log_path}")


def judge(worker, args, world: int, proc: subprocess.Popen, log_path: Path) -> int:
    from celery import Celery
    from kombu import Connection, Consumer

    from evaluator.results import Result

    app = Celery("pkb-e2e", set_as_current=False, fixups=[])
    app.conf.update(worker.common_settings(worker.broker_url()))
    token = str(uuid.uuid4())
    payload = {
        "evaluation": 1, "token": token, "problem": args.problem, "code": args.solution.read_text(),
        "world_size": world, "mode": args.mode, "profile": args.profile,
        "settings": {"timeout_s": args.timeout, "shapes": args.shapes},
    }  # fmt: skip
    started = time.monotonic()
    app.send_task(worker.EVALUATE_TASK, args=[payload], queue=worker.declare_queue(worker.gpu_queue_name(HARDWARE)))
    print(f"published {args.solution.name} for {args.problem}: {args.mode} mode, world size {world}")

    outcome: dict = {}

    def on_message(body, message):
        name = message.headers.get("task")
        task_args = body[0] if isinstance(body, (list, tuple)) else body.get("args", [])
        message.ack()
        stamp = f"{time.monotonic() - started:7.1f} s"
        if name == worker.RECORD_STAGE:
            print(f"{stamp}  stage {task_args[2]} on {task_args[3]}")
        elif name == worker.HEARTBEAT:
            print(f"{stamp}  heartbeat")
        elif name == worker.STORE_RESULT:
            Result.from_dict(task_args[2])
            outcome["doc"] = task_args[2]
        elif name in (worker.REPORT_FAILURE, worker.REDELIVERED):
            outcome["failure"] = f"{name}: {task_args[2:]}"

    with Connection(worker.broker_url(), transport_options=worker.transport_options(worker.broker_url())) as conn:
        with Consumer(conn, [worker.declare_queue(WEB_QUEUE)], callbacks=[on_message], accept=["json"]):
            deadline = started + args.timeout + 300
            while not outcome and time.monotonic() < deadline:
                if proc.poll() is not None:
                    print(f"the worker exited with {proc.returncode}:\n{log_path.read_text()[-3000:]}")
                    return 3
                try:
                    conn.drain_events(timeout=1)
                except TimeoutError:
                    pass
    if "failure" in outcome or "doc" not in outcome:
        print(outcome.get("failure", "no result before the deadline"))
        return 3
    doc = outcome["doc"]
    print(f"\nresult after {time.monotonic() - started:.1f} s: {doc['status']} {doc['reason']}")
    env = doc.get("environment") or {}
    print(f"environment: {json.dumps(env)}")
    for shape in doc["shapes"]:
        sol = (shape.get("solution") or {}).get("time_us")
        ref = (shape.get("reference") or {}).get("time_us")
        util = (shape.get("roofline") or {}).get("utilization")
        print(f"  {shape['name']:>10} {shape.get('dims')}: correct={shape.get('correct')} solution={sol} us "
              f"reference={ref} us speedup={shape.get('speedup')} utilization={util}")  # fmt: skip
    print(f"summary: {json.dumps(doc['summary'])}; stages: {json.dumps(doc.get('stages'))}")
    if args.json:
        args.json.write_text(json.dumps(doc, indent=2))
    return 0 if doc["status"] == "correct" else 1


if __name__ == "__main__":
    sys.exit(main())
