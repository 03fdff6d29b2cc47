"""The GPU worker's own logic, without a broker: what it sends, in which order, and what it never imports."""

from __future__ import annotations

import subprocess
import sys
import threading

import pytest

from evaluator import launch, worker
from evaluator.results import Mode, Result, Settings, Status, summarize


class Outbox:
    def __init__(self):
        self.messages: list[tuple] = []
        self.lock = threading.Lock()

    def __call__(self, name, *args, deadline_s=None):
        with self.lock:
            self.messages.append((name, *args))

    def names(self):
        return [m[0] for m in self.messages if m[0] != worker.HEARTBEAT]


JOB = worker.Job.from_payload({
    "evaluation": 7, "token": "tok", "problem": "allreduce", "code": "def solution(t):\n    return t\n",
    "world_size": 2, "mode": "cpu", "profile": "h100",
    "settings": {"warmup": 1, "iters": 3, "trials": 1, "timeout_s": 60.0, "shapes": ["default"]},
})  # fmt: skip


def incorrect_document() -> dict:
    return Result(
        status=Status.INCORRECT, reason="rank 1: wrong sum", failing_rank=1, problem="allreduce", mode=Mode.CPU,
        world_size=2, hardware="h100", timings_meaningful=False, settings=Settings(warmup=1, iters=3, trials=1,
        timeout_s=60.0), shapes=[], summary=summarize([], Status.INCORRECT), stages={},
        environment={"sandboxed": True}, log_tail="", started_at="", finished_at="",
    ).to_dict()  # fmt: skip


def test_the_worker_process_loads_neither_torch_nor_the_web_application():
    # (kombu imports django.utils for JSON when Django is installed; GPU hosts do not install it.)
    code = (
        "import sys, evaluator.worker as w; w.create_app('x', 'memory://');"
        "print(sorted(m for m in ('torch', 'django.db', 'django.conf', 'psycopg', 'pkb_site') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_request_carries_the_payload_settings():
    kwargs = JOB.request_kwargs()
    assert kwargs == {
        "problem": "allreduce", "solution_code": JOB.code, "world_size": 2, "mode": "cpu", "hardware": "h100",
        "warmup": 1, "iters": 3, "trials": 1, "timeout_s": 60.0, "shapes": ["default"], "sandboxed": True,
    }  # fmt: skip
    launch.EvaluationRequest(**kwargs).validate()


def test_a_judged_solution_sends_claim_stage_changes_heartbeats_then_the_result(monkeypatch):
    doc = incorrect_document()
    release = threading.Event()

    def fake_evaluate(req, on_progress):
        for stage in ("starting", "building", "building", "checking", "timing", "timing", "done"):
            on_progress(stage, {})
            if stage == "checking":
                release.wait(0.5)  # long enough for heartbeats
        return doc

    monkeypatch.setattr(launch, "evaluate", fake_evaluate)
    outbox = Outbox()
    assert worker.run_job(JOB, "gpu-a", outbox, heartbeat_s=0.1) == "result"
    assert outbox.names() == [worker.RECORD_STAGE] * 4 + [worker.STORE_RESULT]
    stages = [m[3] for m in outbox.messages if m[0] == worker.RECORD_STAGE]
    assert stages == ["starting", "building", "checking", "timing"]
    assert outbox.messages[-1] == (worker.STORE_RESULT, 7, "tok", doc)
    assert any(m[0] == worker.HEARTBEAT for m in outbox.messages)


@pytest.mark.parametrize(
    "error, retry",
    [(launch.EvaluatorError("disk full"), True), (ValueError("no such shape"), False), (RuntimeError("bug"), True)],
)
def test_failures_of_the_host_are_reported_never_judged(monkeypatch, error, retry):
    def broken(req, on_progress):
        raise error

    monkeypatch.setattr(launch, "evaluate", broken)
    outbox = Outbox()
    assert worker.run_job(JOB, "gpu-a", outbox, heartbeat_s=5) == "failure"
    name, evaluation, token, reason, retried = outbox.messages[-1]
    assert (name, evaluation, token, retried) == (worker.REPORT_FAILURE, 7, "tok", retry)
    assert str(error) in reason
    assert worker.STORE_RESULT not in outbox.names()


def test_an_invalid_document_is_reported_as_the_evaluators_failure_not_sent(monkeypatch):
    doc = incorrect_document() | {"status": "great"}
    monkeypatch.setattr(launch, "evaluate", lambda req, on_progress: doc)
    outbox = Outbox()
    assert worker.run_job(JOB, "gpu-a", outbox, heartbeat_s=5) == "failure"
    name, _, _, reason, retried = outbox.messages[-1]
    assert name == worker.REPORT_FAILURE and not retried and "invalid result" in reason and "'great'" in reason
    assert worker.STORE_RESULT not in outbox.names()


def test_a_host_without_a_sandbox_refuses_to_judge_uploaded_code(monkeypatch):
    """The real evaluate, on a host whose sandbox probe fails: no player starts, and the reason
    reaches the admin as the evaluation's failure."""
    from evaluator import isolation

    monkeypatch.setattr(isolation, "probe", lambda: "user namespaces are disabled")
    outbox = Outbox()
    assert worker.run_job(JOB, "gpu-a", outbox, heartbeat_s=5) == "failure"
    name, _, _, reason, retried = outbox.messages[-1]
    assert name == worker.REPORT_FAILURE and retried is True
    assert "gpu-a refused to judge" in reason and "user namespaces are disabled" in reason
    assert worker.STORE_RESULT not in outbox.names()


def test_sends_survive_a_short_broker_outage():
    attempts = []

    def flaky():
        attempts.append(1)
        if len(attempts) < 3:
            raise ConnectionRefusedError("broker restarting")

    worker.send_until(flaky, deadline_s=10, what="result")
    assert len(attempts) == 3
    with pytest.raises(ConnectionRefusedError):
        worker.send_until(lambda: (_ for _ in ()).throw(ConnectionRefusedError("down")), deadline_s=0.1, what="x")


def test_broker_settings_per_transport(tmp_path, monkeypatch):
    monkeypatch.setenv("PKB_CONSUMER_TIMEOUT_S", "7200")
    fs = worker.transport_options("filesystem://", tmp_path)
    assert fs["data_folder_in"] == fs["data_folder_out"] == str(tmp_path / "queue")
    assert (tmp_path / "control").is_dir()
    assert worker.transport_options("redis://localhost:6379/0")["visibility_timeout"] == 7200
    assert worker.transport_options("amqp://guest@localhost//") == {"confirm_publish": True}
    queue = worker.declare_queue("gpu.h200x4")
    assert queue.queue_arguments == {"x-consumer-timeout": 7_200_000}
    assert (queue.durable, queue.exchange.name, queue.routing_key) == (True, "pkb", "gpu.h200x4")
    settings = worker.common_settings("amqp://guest@localhost//")
    assert settings["task_acks_late"] and settings["task_reject_on_worker_lost"]
    assert settings["worker_prefetch_multiplier"] == 1 and settings["result_backend"] is None


def test_announces_itself_while_it_serves_busy_or_idle_then_that_it_stopped():
    outbox = Outbox()
    presence = worker.Presence(outbox, "gpu-h200x4@host", "h200x4", interval_s=0.05)
    presence.start()
    deadline = threading.Event()
    while len(outbox.messages) < 3 and not deadline.wait(0.02):
        pass
    presence.stop()
    *alive, last = outbox.messages
    assert len(alive) >= 3 and set(alive) == {(worker.WORKER_ALIVE, "gpu-h200x4@host", "h200x4", True, 0.05)}
    assert last == (worker.WORKER_ALIVE, "gpu-h200x4@host", "h200x4", False, 0.05)
    presence.stop()  # once only
    assert len(outbox.messages) == len(alive) + 1


def test_an_announcement_the_broker_refuses_is_dropped_not_raised():
    def down(*args, **kwargs):
        raise ConnectionRefusedError("broker down")

    presence = worker.Presence(down, "w", "cpu", interval_s=10)
    presence.stop()  # nothing raised
