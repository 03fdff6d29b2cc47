"""The GPU worker: consumes `gpu.<hardware>` from the broker, judges each submission with the
evaluator's sandboxed rank processes, and sends everything it learns back as tasks on the web queue.

A GPU host runs untrusted code, so this process holds broker credentials only: no Django, no
database, and no torch (CUDA is initialized only in the rank processes the evaluator spawns).
Every decision about an evaluation's state is taken on the web side, by conditional updates keyed
on the dispatch token that travels with the task:

    record_stage(id, token, "starting", worker)   the claim; the web side counts the attempt
    record_stage(id, token, stage, worker)         live progress
    heartbeat(id, token, worker)                   every PKB_HEARTBEAT_S while evaluating
    store_result(id, token, document)              the result document, stored once
    report_failure(id, token, reason, retry)       the evaluator or host broke: retried, capped
    redelivered(id, token, worker)                 the broker handed out a delivery that was never
                                                   acknowledged (a worker or the broker died):
                                                   the web side decides whether to run it again
    worker_alive(worker, hardware, online, s)      from start to stop, every PKB_PRESENCE_S, busy or
                                                   idle: which workers serve which hardware, so a
                                                   page can say that no worker will run an evaluation

Run one worker per GPU set, e.g. `CUDA_VISIBLE_DEVICES=0,1,2,3 python -m evaluator.worker --hardware h200x4`.
Settings come from the environment: PKB_BROKER_URL (empty: the embedded filesystem broker under
PKB_BROKER_DIR), PKB_HARDWARE, PKB_WORKER_NAME, PKB_HEARTBEAT_S, PKB_PRESENCE_S, PKB_CONSUMER_TIMEOUT_S,
PKB_WEB_QUEUE.
"""

from __future__ import annotations

import argparse
import ctypes
import logging
import os
import queue
import socket
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from celery import Celery, signals
from kombu import Exchange, Queue

from evaluator import placement
from evaluator.results import InvalidResult, Result, Stage

log = logging.getLogger("pkb.worker")

REPO_ROOT = Path(__file__).resolve().parent.parent
EXCHANGE = "pkb"
EVALUATE_TASK = "pkb.evaluate"
# Tasks of the web side (platform/dispatch/tasks.py), called by name: this process never imports Django.
RECORD_STAGE = "dispatch.tasks.record_stage"
HEARTBEAT = "dispatch.tasks.heartbeat"
STORE_RESULT = "dispatch.tasks.store_result"
REPORT_FAILURE = "dispatch.tasks.report_failure"
REDELIVERED = "dispatch.tasks.redelivered"
WORKER_ALIVE = "dispatch.tasks.worker_alive"

# RabbitMQ closes a channel whose delivery stays unacknowledged longer than its consumer timeout,
# and Redis hands an unacknowledged message out again after its visibility timeout. Evaluations
# are acknowledged late (when they finish), so both must exceed the longest hard time limit.
DEFAULT_CONSUMER_TIMEOUT_S = 4 * 3600
# Publishing a result outlives a broker restart: retried for this long before the worker gives up
# (and the reaper, seeing no heartbeat, has the evaluation run again).
RESULT_SEND_DEADLINE_S = 900.0
PROGRESS_SEND_DEADLINE_S = 3.0
PR_SET_DUMPABLE = 4
NO_MULTICAST = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}


def env_float(name: str, default: float) -> float:
    value = os.environ.get(name, "").strip()
    return float(value) if value else default


def gpu_queue_name(hardware: str) -> str:
    return f"gpu.{hardware}"


def web_queue_name() -> str:
    """The queue the web side consumes (PKB_WEB_QUEUE): lets several platforms share one broker."""
    return os.environ.get("PKB_WEB_QUEUE", "").strip() or "web"


def presence_interval_s() -> float:
    """How often a worker announces that it serves its queue (PKB_PRESENCE_S). Not the heartbeat:
    these messages share the web queue with results and heartbeats, and a fast heartbeat (tests)
    would multiply them."""
    return env_float("PKB_PRESENCE_S", 30.0)


def consumer_timeout_s() -> float:
    return env_float("PKB_CONSUMER_TIMEOUT_S", DEFAULT_CONSUMER_TIMEOUT_S)


def declare_queue(name: str) -> Queue:
    """The one declaration of a queue, shared by publishers and consumers: RabbitMQ refuses a second
    declaration whose arguments differ. `x-consumer-timeout` is honoured from RabbitMQ 3.12 on
    (older servers ignore it and need `consumer_timeout` in rabbitmq.conf, see deploy/)."""
    return Queue(
        name,
        Exchange(EXCHANGE, type="direct", durable=True),
        routing_key=name,
        durable=True,
        queue_arguments={"x-consumer-timeout": int(consumer_timeout_s() * 1000)},
    )


def default_broker_dir() -> Path:
    return Path(os.environ.get("PKB_BROKER_DIR") or REPO_ROOT / "var" / "broker")


def broker_url() -> str:
    return os.environ.get("PKB_BROKER_URL", "").strip() or "filesystem://"


def transport_options(url: str, broker_dir: Path | None = None) -> dict[str, Any]:
    """Per-transport options: publisher confirms on RabbitMQ, the visibility timeout on Redis, and
    the folders of kombu's filesystem transport (the embedded broker that needs no server)."""
    scheme = url.split("://", 1)[0].split("+", 1)[0]
    if scheme == "filesystem":
        root = broker_dir or default_broker_dir()
        folders = {name: root / name for name in ("queue", "control", "processed")}
        for folder in folders.values():
            folder.mkdir(parents=True, exist_ok=True)
        return {
            "data_folder_in": str(folders["queue"]),
            "data_folder_out": str(folders["queue"]),
            "control_folder": str(folders["control"]),
            "processed_folder": str(folders["processed"]),
            "store_processed": False,
            "polling_interval": 0.2,
        }
    if scheme in ("redis", "rediss"):
        return {"visibility_timeout": consumer_timeout_s()}
    if scheme in ("amqp", "amqps", "pyamqp"):
        return {"confirm_publish": True}
    return {}


def common_settings(url: str, broker_dir: Path | None = None) -> dict[str, Any]:
    """Celery settings both sides share (lower-case names; the Django side adds the CELERY_ prefix)."""
    return {
        "broker_url": url,
        "broker_transport_options": transport_options(url, broker_dir),
        "broker_connection_retry_on_startup": True,
        "broker_connection_max_retries": None,
        "task_serializer": "json",
        "accept_content": ["json"],
        "task_ignore_result": True,
        "result_backend": None,
        "task_acks_late": True,
        "task_reject_on_worker_lost": True,
        "task_default_exchange": EXCHANGE,
        "task_default_exchange_type": "direct",
        "task_default_queue": web_queue_name(),
        "task_default_routing_key": web_queue_name(),
        "worker_prefetch_multiplier": 1,
        # A running evaluation keeps going when the broker goes away; its result is published once
        # the broker is back, and a copy delivered meanwhile is stored at most once (same token).
        "worker_cancel_long_running_tasks_on_connection_loss": False,
        # The filesystem transport has no broadcast worth polling for.
        "worker_enable_remote_control": not url.startswith("filesystem"),
        "enable_utc": True,
    }


@dataclass(frozen=True)
class Job:
    """What crosses the broker: code, problem, settings, evaluation id and dispatch token."""

    evaluation: int
    token: str
    problem: str
    code: str
    world_size: int
    mode: str
    profile: str | None
    settings: dict[str, Any]

    REQUEST_SETTINGS = ("shapes", "dims", "warmup", "iters", "trials", "timeout_s")

    @classmethod
    def from_payload(cls, payload: dict[str, Any]) -> "Job":
        return cls(
            evaluation=int(payload["evaluation"]),
            token=str(payload["token"]),
            problem=str(payload["problem"]),
            code=str(payload["code"]),
            world_size=int(payload["world_size"]),
            mode=str(payload["mode"]),
            profile=payload.get("profile"),
            settings=dict(payload.get("settings") or {}),
        )

    def request_kwargs(self) -> dict[str, Any]:
        kwargs = {k: self.settings[k] for k in self.REQUEST_SETTINGS if self.settings.get(k) is not None}
        return dict(
            problem=self.problem,
            solution_code=self.code,
            world_size=self.world_size,
            mode=self.mode,
            hardware=self.profile,
            sandboxed=True,  # whatever the payload says: a worker judges uploaded code
            **kwargs,
        )


Send = Callable[..., None]


def send_until(publish: Callable[[], object], deadline_s: float, what: str) -> None:
    """Publish, retrying through broker outages until the deadline. (kombu's own retry policy
    gives up at once when the connection is refused while a channel is being opened.)"""
    deadline = time.monotonic() + deadline_s
    delay = 0.5
    while True:
        try:
            publish()
            return
        except Exception as exc:
            if time.monotonic() + delay > deadline:
                raise
            log.warning("could not send %s (%s); retrying in %.1f s", what, exc, delay)
            time.sleep(delay)
            delay = min(delay * 2, 10.0)


class Progress:
    """Forwards stage changes and sends heartbeats from one thread, so the evaluator's loop never
    waits on the broker and a broker outage only delays progress messages."""

    def __init__(self, send: Send, job: Job, worker: str, interval_s: float):
        self.send, self.job, self.worker, self.interval_s = send, job, worker, interval_s
        self.stages: queue.Queue[str | None] = queue.Queue()
        self.last_stage = Stage.STARTING
        self.thread = threading.Thread(target=self._run, name=f"progress-{job.evaluation}", daemon=True)

    def __enter__(self) -> "Progress":
        self.thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self.stages.put(None)
        self.thread.join(timeout=30)

    def on_progress(self, stage: str, detail: dict) -> None:
        # Each rank reports every stage; only changes travel. "done" travels with the result.
        if stage != self.last_stage and stage != Stage.DONE:
            self.last_stage = stage
            self.stages.put(stage)

    def _run(self) -> None:
        job = self.job
        while True:
            try:
                stage = self.stages.get(timeout=self.interval_s)
            except queue.Empty:
                self._send(HEARTBEAT, job.evaluation, job.token, self.worker)
                continue
            if stage is None:
                return
            self._send(RECORD_STAGE, job.evaluation, job.token, stage, self.worker)

    def _send(self, name: str, *args) -> None:
        try:
            self.send(name, *args, deadline_s=PROGRESS_SEND_DEADLINE_S)
        except Exception as exc:  # progress is best effort; the lease covers a silent worker
            log.warning("could not send %s for evaluation %s: %s", name, self.job.evaluation, exc)


class Presence:
    """Tells the web side that this worker serves its hardware's queue: once when it is ready, then
    every `interval_s` whether it is busy or idle, and once more ("offline") when it stops. Runs in
    the worker's main process, on a thread of its own with its own broker connections."""

    def __init__(self, send: Send, worker: str, hardware: str, interval_s: float):
        self.send, self.worker, self.hardware, self.interval_s = send, worker, hardware, interval_s
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, name="presence", daemon=True)

    def start(self) -> None:
        if not self.thread.is_alive() and not self.stopped.is_set():
            self.thread.start()

    def stop(self) -> None:
        if self.stopped.is_set():
            return
        self.stopped.set()
        if self.thread.is_alive():
            self.thread.join(timeout=PROGRESS_SEND_DEADLINE_S + 1)
        self._announce(online=False)

    def _run(self) -> None:
        while not self.stopped.is_set():
            self._announce(online=True)
            self.stopped.wait(self.interval_s)

    def _announce(self, online: bool) -> None:
        try:
            self.send(WORKER_ALIVE, self.worker, self.hardware, online, self.interval_s)
        except Exception as exc:  # best effort: the next announcement may get through
            log.warning("could not announce this worker (%s): %s", "online" if online else "offline", exc)


def run_job(job: Job, worker: str, send: Send, heartbeat_s: float) -> str:
    """Claim, evaluate, report. Returns what was reported: "result" or "failure"."""
    from evaluator.launch import EvaluationRequest, EvaluatorError, NoSandbox, evaluate

    send(RECORD_STAGE, job.evaluation, job.token, Stage.STARTING, worker)
    failure: tuple[str, bool] | None = None
    doc = None
    with Progress(send, job, worker, heartbeat_s) as progress:
        try:
            doc = evaluate(EvaluationRequest(**job.request_kwargs()), on_progress=progress.on_progress)
            result = Result.from_dict(doc)  # what the web side will accept, or a failure now
        except InvalidResult as exc:  # the same evaluator builds the same document on any host
            failure = (f"the evaluator produced an invalid result on {worker}: {exc}", False)
        except NoSandbox as exc:
            # Uploaded code is never judged unsandboxed. Another host may manage: retry.
            failure = (f"{worker} refused to judge: {exc}", True)
        except EvaluatorError as exc:
            failure = (f"evaluator failure on {worker}: {exc}", True)
        except (ValueError, KeyError, TypeError) as exc:
            # A request the evaluator refuses (unknown problem or shape, unsupported world size)
            # fails the same way on every host: no retry.
            failure = (f"the evaluator refused the request: {exc}", False)
        except Exception as exc:  # anything else is the host's fault, never the solution's
            log.exception("evaluation %s broke the worker", job.evaluation)
            failure = (f"worker failure on {worker}: {type(exc).__name__}: {exc}", True)
    if failure is not None:
        reason, retry = failure
        send(REPORT_FAILURE, job.evaluation, job.token, reason, retry)
        return "failure"
    send(STORE_RESULT, job.evaluation, job.token, doc)
    log.info("evaluation %s: %s", job.evaluation, result.status)
    return "result"


def create_app(hardware: str, url: str | None = None) -> Celery:
    """The GPU side's own Celery app: consumes gpu.<hardware> only, one evaluation at a time."""
    url = url or broker_url()
    # No Django fix-up: a GPU host never loads the web application, whatever its environment says.
    app = Celery("pkb-gpu", set_as_current=True, fixups=[])
    app.conf.update(common_settings(url))
    app.conf.update(
        task_queues=[declare_queue(gpu_queue_name(hardware))],
        worker_concurrency=1,
        worker_hijack_root_logger=True,
    )
    web_queue = declare_queue(web_queue_name())
    heartbeat_s = env_float("PKB_HEARTBEAT_S", 30.0)
    presence_s = presence_interval_s()

    def send(name: str, *args, deadline_s: float = RESULT_SEND_DEADLINE_S) -> None:
        send_until(lambda: app.send_task(name, args=list(args), queue=web_queue), deadline_s, name)

    def announce(name: str, *args) -> None:
        """A presence message: on a connection of its own (never the pool the evaluation task
        uses), and dropped unread once a few more are due, so a backlog never revives a stopped worker."""

        def publish() -> None:
            with app.connection_for_write() as connection:
                app.send_task(
                    name, args=list(args), queue=web_queue, connection=connection, expires=max(3 * presence_s, 30.0)
                )

        send_until(publish, PROGRESS_SEND_DEADLINE_S, name)

    app.announce = announce

    @app.task(name=EVALUATE_TASK, bind=True, acks_late=True, reject_on_worker_lost=True, ignore_result=True)
    def evaluate_task(self, payload: dict[str, Any]) -> str:
        job = Job.from_payload(payload)
        worker = self.request.hostname or socket.gethostname()
        if (self.request.delivery_info or {}).get("redelivered"):
            # Handed out before and never acknowledged: a worker died with it, or the broker restarted.
            # Whether it runs again (and whether that counts as an attempt) is the web side's call.
            send(REDELIVERED, job.evaluation, job.token, worker)
            return "redelivered"
        return run_job(job, worker, send, heartbeat_s)

    app.evaluate_task = evaluate_task
    return app


def default_worker_name(hardware: str) -> str:
    devices = os.environ.get("CUDA_VISIBLE_DEVICES", "").replace(",", "-")
    suffix = f"-gpus{devices}" if devices else f"-{os.getpid()}"
    return f"gpu-{hardware}@{socket.gethostname()}{suffix}"


def hide_from_solutions() -> None:
    """Make this process (and its forked pool children) non-dumpable: its /proc files, the broker
    credentials in /proc/<pid>/environ among them, become unreadable to the solutions' rank
    processes, which run as the same user. The ranks are exec'd, so the flag does not reach them."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    except (OSError, AttributeError):
        log.warning("could not make the worker non-dumpable; run ranks under a separate user")


def worker_cpus() -> set[int] | None:
    """The CPUs this worker keeps to (PKB_WORKER_CPUS, e.g. "0-63"), or None for all it may use.
    Several workers on one host each keep to their own: every evaluation places its judges and
    players within its worker's CPUs (evaluator/placement.py), never on another worker's."""
    value = os.environ.get(placement.WORKER_ENV, "").strip()
    if not value:
        return None
    try:
        cpus = placement.cpu_list(value)
    except ValueError:
        raise SystemExit(f"evaluator.worker: {placement.WORKER_ENV}={value!r} is not a CPU list such as 0-63") from None
    if not cpus <= os.sched_getaffinity(0):
        raise SystemExit(f"evaluator.worker: {placement.WORKER_ENV}={value!r} names CPUs this worker may not run on")
    return cpus


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m evaluator.worker", description=__doc__.split("\n\n")[0])
    parser.add_argument("--hardware", default=os.environ.get("PKB_HARDWARE"), help="hardware slug; queue gpu.<slug>")
    parser.add_argument("--name", default=os.environ.get("PKB_WORKER_NAME"), help="worker name (default: derived)")
    parser.add_argument("--loglevel", default=os.environ.get("PKB_LOG_LEVEL", "INFO"))
    args = parser.parse_args(argv)
    if not args.hardware:
        parser.error("--hardware (or PKB_HARDWARE) is required")
    if "torch" in sys.modules:  # CUDA must never be initialized in the worker's parent process
        raise SystemExit("evaluator.worker: torch was imported before the worker started")
    os.environ.update(NO_MULTICAST)
    hide_from_solutions()
    if cpus := worker_cpus():
        os.sched_setaffinity(0, cpus)
    from evaluator import isolation

    if (reason := isolation.probe()) is not None:
        # It still serves its queue, so that each evaluation it takes ends with this reason for the
        # admin to see, instead of waiting for a worker that never comes.
        log.error("this host cannot sandbox submitted code and will refuse every evaluation: %s", reason)
    app = create_app(args.hardware)
    name = args.name or default_worker_name(args.hardware)
    presence = Presence(app.announce, name, args.hardware, presence_interval_s())
    # In the main process, once the pool is up, and when the worker stops (warm shutdown).
    signals.worker_ready.connect(lambda **_: presence.start(), weak=False)
    signals.worker_shutdown.connect(lambda **_: presence.stop(), weak=False)
    app.worker_main(
        [
            "worker",
            f"--hostname={name}",
            f"--loglevel={args.loglevel}",
            "--pool=prefork",
            "--concurrency=1",
            "--prefetch-multiplier=1",
            f"--queues={gpu_queue_name(args.hardware)}",
            "--without-gossip",
            "--without-mingle",
            "--without-heartbeat",
        ]
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
