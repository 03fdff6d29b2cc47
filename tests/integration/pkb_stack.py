"""A real deployment in miniature for the integration tests: a PostgreSQL database cloned from a
migrated template, web-side Celery workers (with the scheduler), GPU workers in `cpu` mode and the
web server, each a separate process in its own session, all on one broker.

Rows are read with plain SQL (the test process never opens Django's connection), submissions are
made through the platform's own service (`manage.py shell`) or through HTTP, and every process a
stack started (rank processes of killed workers included) is killed when it closes.
"""

from __future__ import annotations

import ctypes
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path

import psycopg

from evaluator import sandbox

REPO = Path(__file__).resolve().parents[2]
PYTHON = sys.executable
PG_ADMIN_URL = os.environ.get("PKB_TEST_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/postgres")
RABBITMQ_URL = os.environ.get("PKB_TEST_RABBITMQ_URL", "amqp://guest:guest@127.0.0.1:5672//")
REDIS_URL = os.environ.get("PKB_TEST_REDIS_URL", "redis://127.0.0.1:6379/11")
PR_SET_CHILD_SUBREAPER = 36

# Fast clocks: heartbeats every second, a worker silent for 4 s is lost, the reaper every 2 s.
FAST_SETTINGS = {
    "PKB_HEARTBEAT_S": "1",
    "PKB_LEASE_S": "4",
    "PKB_REAP_INTERVAL_S": "2",
    "PKB_RETRY_BACKOFF_S": "0",
    "PKB_UNPUBLISHED_AFTER_S": "3",
    "PKB_EVAL_TIMEOUT_S": "120",
    "PKB_EVAL_SLACK_S": "20",
    "PKB_CPU_EVAL_WARMUP": "1",
    "PKB_CPU_EVAL_ITERS": "3",
    "PKB_CPU_EVAL_TRIALS": "1",
    "PKB_LOG_LEVEL": "INFO",
}
# What a GPU host must never hold.
WEB_ONLY = ("PKB_DATABASE_URL", "PKB_SECRET_KEY", "DJANGO_SETTINGS_MODULE")

CORRECT_SOLUTION = """import torch
import torch.distributed as dist


@torch.no_grad()
def solution(tensor):
    dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
    return tensor
"""

# Loading takes a while on every rank: a wide window to kill a worker in the middle of one.
SLOW_SOLUTION = """import time

import torch
import torch.distributed as dist

time.sleep({seconds})


@torch.no_grad()
def solution(tensor):
    dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
    return tensor
"""


def reachable(url: str, default_port: int) -> bool:
    host, port = re.match(r"^\w+://(?:[^@/]*@)?([^:/]+)(?::(\d+))?", url).groups()
    try:
        with socket.create_connection((host, int(port or default_port)), timeout=1):
            return True
    except OSError:
        return False


def free_port() -> int:
    with closing(socket.socket()) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(predicate: Callable[[], object], timeout: float, what: str, interval: float = 0.25):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(interval)


def become_subreaper(on: bool) -> None:
    """While a stack runs, orphans of killed workers (rank processes live in their own sessions)
    are re-parented to this process, so closing the stack finds and kills them."""
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1 if on else 0, 0, 0, 0)


# ---- database ----------------------------------------------------------------------------------


def pg_url(name: str) -> str:
    return PG_ADMIN_URL.rsplit("/", 1)[0] + "/" + name


def admin_sql(*statements: str) -> None:
    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
        for statement in statements:
            conn.execute(statement)


def create_template(name: str, tmp: Path) -> None:
    """A migrated database with the suite and the cpu hardware, cloned by every test."""
    admin_sql(f'DROP DATABASE IF EXISTS "{name}"', f'CREATE DATABASE "{name}"')
    env = process_env(tmp, "filesystem://", name, "web", {})
    for args in (["migrate", "-v0"], ["sync_problems"]):
        subprocess.run([PYTHON, "manage.py", *args], cwd=REPO, env=env, check=True, capture_output=True, timeout=300)


def clone_database(template: str) -> str:
    name = f"pkb_it_{uuid.uuid4().hex[:10]}"
    admin_sql(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
    return name


def drop_database(name: str) -> None:
    admin_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def process_env(tmp: Path, broker_url: str, database: str, web_queue: str, settings: dict[str, str]) -> dict[str, str]:
    """The environment of every process of a test deployment (the test's own PKB_* settings dropped)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PKB_", "CELERY_", "PYTEST_"))}
    env.update(FAST_SETTINGS)
    env.update(
        PYTHONPATH=f"{REPO}{os.pathsep}{REPO / 'platform'}",
        PYTHONUNBUFFERED="1",
        PKB_BROKER_URL=broker_url,
        PKB_BROKER_DIR=str(tmp / "broker"),
        PKB_WEB_QUEUE=web_queue,
        PKB_DATABASE_URL=pg_url(database),
        PKB_BEAT_SCHEDULE=str(tmp / "beat-schedule"),
        PKB_BUILD_DIR=str(tmp / "builds"),
        DJANGO_SETTINGS_MODULE="pkb_site.settings",
    )
    env.update(settings)
    return env


# ---- processes ---------------------------------------------------------------------------------


@dataclass
class Proc:
    name: str
    popen: subprocess.Popen
    log_path: Path

    @property
    def pid(self) -> int:
        return self.popen.pid

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def alive(self) -> bool:
        return self.popen.poll() is None

    def tree(self) -> set[int]:
        return {self.pid} | sandbox.descendants([self.pid])

    def kill_tree(self) -> None:
        """SIGKILL the process, its group and everything it started (rank sessions too): what a
        host crash or the OOM killer's cgroup kill leaves of a worker."""
        pids = self.tree()
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.popen.wait(timeout=10)

    def terminate(self) -> None:
        if self.alive():
            try:
                os.killpg(self.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass

    def stop(self, deadline: float) -> None:
        """After terminate(): wait until the deadline, then kill whatever is left."""
        try:
            self.popen.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass
        if self.alive() or sandbox.descendants([self.pid]):
            self.kill_tree()
        try:
            os.killpg(self.pid, signal.SIGKILL)  # leftovers of the group whose leader already exited
        except (ProcessLookupError, PermissionError):
            pass


@dataclass
class Stack:
    tmp: Path
    broker_url: str
    database: str
    settings: dict[str, str] = field(default_factory=dict)
    procs: list[Proc] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.tag = uuid.uuid4().hex[:8]
        self.hardware: list[str] = []
        self.web_queue = f"web.it{self.tag}"
        self.tmp.mkdir(parents=True, exist_ok=True)
        become_subreaper(True)
        self.baseline = sandbox.descendants([os.getpid()])

    def hardware_slug(self, label: str) -> str:
        return f"it{self.tag}-{label}"

    # -- environment -----------------------------------------------------------------------------
    def env(self, web: bool = True) -> dict[str, str]:
        env = process_env(self.tmp, self.broker_url, self.database, self.web_queue, self.settings)
        if not web:
            for key in WEB_ONLY:
                env.pop(key, None)
        return env

    def spawn(self, name: str, args: list[str], web: bool = True, extra_env: dict | None = None) -> Proc:
        log_path = self.tmp / f"{name}.log"
        with open(log_path, "ab") as log:
            popen = subprocess.Popen(
                args,
                cwd=REPO,
                env={**self.env(web), **(extra_env or {})},
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        proc = Proc(name, popen, log_path)
        self.procs.append(proc)
        return proc

    # -- the processes of a deployment -------------------------------------------------------------
    def web_worker(self, name: str = "web", concurrency: int = 2, beat: bool = True) -> Proc:
        args = [
            PYTHON,
            "-m",
            "celery",
            "-A",
            "pkb_site",
            "worker",
            "-Q",
            self.web_queue,
            "-c",
            str(concurrency),
            "-n",
            f"{name}-{self.tag}@%h",
            "--without-gossip",
            "--without-mingle",
            "--without-heartbeat",
            "-l",
            "INFO",
        ]
        if beat:
            args += ["-B", "-s", str(self.tmp / f"{name}-beat")]
        return self.spawn(name, args)

    def gpu_worker(self, hardware: str, name: str) -> Proc:
        return self.spawn(
            name, [PYTHON, "-m", "evaluator.worker", "--hardware", hardware, "--name", f"{name}@{self.tag}"], web=False
        )

    def web_server(self, port: int) -> Proc:
        return self.spawn(
            "gunicorn",
            [
                PYTHON,
                "-m",
                "gunicorn",
                "-c",
                str(REPO / "deploy" / "gunicorn.conf.py"),
                "--bind",
                f"127.0.0.1:{port}",
                "--workers",
                "2",
                "pkb_site.wsgi:application",
            ],
        )

    def wait_ready(self, proc: Proc, timeout: float = 60) -> None:
        wait_for(lambda: " ready." in proc.log() or not proc.alive(), timeout, f"{proc.name} to start")
        assert proc.alive(), f"{proc.name} died:\n{proc.log()[-3000:]}"

    # -- the platform's own entry points -----------------------------------------------------------
    def manage(self, *args: str, stdin: str | None = None, timeout: float = 120) -> str:
        done = subprocess.run(
            [PYTHON, "manage.py", *args],
            cwd=REPO,
            env=self.env(),
            input=stdin,
            text=True,
            capture_output=True,
            timeout=timeout,
        )
        assert done.returncode == 0, f"manage.py {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}"
        return done.stdout

    def setup(self, hardware: list[str], users: dict[str, str] | None = None) -> None:
        """Hardware rows (cpu mode, two ranks) and user accounts, in one Django start."""
        self.hardware += hardware
        script = [
            "from django.contrib.auth import get_user_model",
            "from catalog.sync import hardware_from_profile",
        ]
        script += [f"hardware_from_profile({slug!r}, 'h100', 2, mode='cpu', name={slug!r}).save()" for slug in hardware]
        script += [f"get_user_model().objects.create_user({u!r}, password={p!r})" for u, p in (users or {}).items()]
        self.manage("shell", stdin="\n".join(script) + "\n")

    def submit(
        self, hardware: list[str], code: str | list[str], count: int = 1, problem: str = "allreduce"
    ) -> list[int]:
        """Submissions through the same service the submit page and the API use (published on
        commit), round-robin over `hardware`; `code` is one source, or one per submission.
        Returns the new evaluation ids, oldest first."""
        codes = code if isinstance(code, list) else [code] * count
        script = f"""
import json
from django.contrib.auth import get_user_model
from catalog.models import Hardware, Problem
from submissions.services import NewSubmission, create_submission

user, _ = get_user_model().objects.get_or_create(username="integration", defaults={{"is_staff": True}})
problem = Problem.objects.get(slug={problem!r})
ids = []
for i, code in enumerate({codes!r}):
    slug = {hardware!r}[i % {len(hardware)}]
    hw = [Hardware.objects.get(slug=slug)]
    sub = create_submission(user, NewSubmission(problem=problem, model_tag="integration", backend="pytorch",
                                                code=code, hardware=hw, sample_index=i))
    ids += [e.pk for e in sub.evaluations.order_by("pk")]
print("IDS=" + json.dumps(ids))
"""
        out = self.manage("shell", stdin=script, timeout=300)
        return json.loads(re.search(r"IDS=(\[.*\])", out).group(1))

    # -- reading rows ------------------------------------------------------------------------------
    def sql(self, query: str, params: tuple = ()) -> list[dict]:
        with psycopg.connect(pg_url(self.database), row_factory=psycopg.rows.dict_row) as conn:
            return conn.execute(query, params).fetchall()

    def evaluations(self, ids: list[int]) -> dict[int, dict]:
        rows = self.sql(
            "SELECT id, state, stage, status, attempts, worker, reason, correct, speedup, output_digest, "
            "dispatch_token, result IS NOT NULL AS has_result FROM submissions_evaluation WHERE id = ANY(%s)",
            (list(ids),),
        )
        return {row["id"]: row for row in rows}

    def wait_finished(self, ids: list[int], timeout: float) -> dict[int, dict]:
        def finished():
            rows = self.evaluations(ids)
            return (
                rows if all(r["state"] in ("done", "failed") for r in rows.values()) and len(rows) == len(ids) else None
            )

        try:
            return wait_for(finished, timeout, f"{len(ids)} evaluations to finish", interval=0.5)
        except AssertionError:
            states = Counter(r["state"] for r in self.evaluations(ids).values())
            raise AssertionError(
                f"evaluations not finished after {timeout:g} s: {dict(states)}\n{self.tail_logs()}"
            ) from None

    def stored_counts(self) -> Counter:
        """How many times each evaluation's result was stored, from the web workers' logs."""
        counts: Counter = Counter()
        for proc in self.procs:
            for match in re.finditer(r"evaluation (\d+): result stored", proc.log()):
                counts[int(match.group(1))] += 1
        return counts

    def tail_logs(self, chars: int = 2500) -> str:
        return "\n".join(f"--- {p.name} ---\n{p.log()[-chars:]}" for p in self.procs)

    def remove_queues(self) -> None:
        """Delete this stack's queues from a shared broker (and, on Redis, deliveries a killed worker
        left unacknowledged, which would otherwise come back hours later)."""
        if not self.broker_url.startswith(("amqp", "redis")):
            return
        import kombu

        from evaluator.worker import declare_queue

        names = [self.web_queue] + [f"gpu.{slug}" for slug in self.hardware]
        try:
            with kombu.Connection(self.broker_url, connect_timeout=3) as conn:
                for name in names:
                    queue = declare_queue(name)(conn.channel())
                    queue.declare()  # so that the channel knows the bindings the delete removes
                    queue.delete()
        except Exception:
            pass
        if self.broker_url.startswith("redis"):
            import redis

            client = redis.Redis.from_url(self.broker_url)
            for member in client.smembers("_kombu.binding.celery.pidbox"):  # workers' remote-control queues
                if self.tag.encode() in member:
                    client.srem("_kombu.binding.celery.pidbox", member)
            for tag, value in client.hgetall("unacked").items():
                try:
                    routing_key = json.loads(value)[2]
                except (ValueError, IndexError, TypeError):
                    continue
                if routing_key in names:
                    client.hdel("unacked", tag)
                    client.zrem("unacked_index", tag)

    # -- teardown ----------------------------------------------------------------------------------
    def close(self) -> None:
        for proc in self.procs:
            proc.terminate()
        deadline = time.monotonic() + 8
        for proc in self.procs:
            proc.stop(deadline)
        strays = sandbox.descendants([os.getpid()]) - self.baseline
        for pid in strays:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for pid in strays:
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass
        become_subreaper(False)


def csrf_token(html: str) -> str:
    return re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', html).group(1)


def submission_finished(session, base: str, submission_id: int):
    """The API's view of a submission once every evaluation of it has finished, else None."""
    data = session.get(f"{base}/api/submissions/{submission_id}").json()
    return data if data["finished"] else None
