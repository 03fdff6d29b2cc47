"""The dispatch state machine in-process: conditional updates, tokens, retries, the reaper, queue
positions. Publishing is recorded instead of sent; the process tests exercise the real broker."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from django.utils import timezone

from dispatch import positions, publish, reaper, tasks, transitions
from evaluator.results import Digests, Mode, Result, Settings, ShapeResult, Status, summarize

pytestmark = pytest.mark.django_db

CODE = "import torch\n\n\ndef solution(tensor):\n    return tensor\n"


class Recorder:
    def __init__(self):
        self.sent: list[dict] = []
        self.fail = False

    def __call__(self, evaluation, countdown=0):
        if self.fail:
            raise ConnectionRefusedError("broker down")
        self.sent.append({**publish.payload(evaluation), "countdown": countdown})


@pytest.fixture
def sent(monkeypatch, settings):
    settings.PKB_MAX_ATTEMPTS = 3
    settings.PKB_LEASE_S = 300
    settings.PKB_RETRY_BACKOFF_S = 10
    recorder = Recorder()
    monkeypatch.setattr(publish, "publish", recorder)
    return recorder


@pytest.fixture
def hardware(db):
    from catalog.sync import hardware_from_profile

    hw = hardware_from_profile("testcpu", "h100", 2, mode="cpu")
    hw.save()
    return hw


@pytest.fixture
def make_evaluation(db, hardware, django_user_model):
    from catalog.models import Problem
    from submissions.models import Evaluation, Submission

    user = django_user_model.objects.create_user("dispatcher")
    shapes = [
        {"name": "small", "dims": {"M": 64, "N": 1024}, "default": False},
        {"name": "default", "dims": {"M": 1024, "N": 1024}, "default": True},
    ]
    problem = Problem.objects.create(
        slug="allreduce",
        pkb_id=1,
        title="All-reduce",
        level=1,
        parallelism="collective",
        shapes=shapes,
        world_sizes=[2, 4, 8],
    )

    def make(hw=None, queued_at=None):
        sub = Submission.objects.create(problem=problem, owner=user, model_tag="human", backend="pytorch", code=CODE)
        return Evaluation.objects.create(
            submission=sub, hardware=hw or hardware, world_size=2, mode="cpu", queued_at=queued_at or timezone.now()
        )

    return make


def document(status="correct", problem="allreduce", digests=("a" * 64, "b" * 64)):
    status = Status(status)
    correct = status is Status.CORRECT
    shape = ShapeResult(
        name="default", dims={"M": 1024, "N": 1024}, default=True, correct=correct, max_abs_error=0.0,
        solution=None, reference=None, speedup=2.0 if correct else None, roofline=None,
        digests=Digests(solution=list(digests), reference=list(digests)), notes=[],
    )
    return Result(
        status=status, reason="" if correct else "wrong on rank 1", failing_rank=None if correct else 1,
        problem=problem, mode=Mode.CPU, world_size=2, hardware=None, timings_meaningful=False,
        settings=Settings(warmup=1, iters=3, trials=1, timeout_s=60.0), shapes=[shape],
        summary=summarize([shape], status), stages={}, environment={"sandboxed": True}, log_tail="",
        started_at="", finished_at="",
    ).to_dict()  # fmt: skip


def published(evaluation, sent) -> str:
    assert publish.enqueue(evaluation.pk)
    evaluation.refresh_from_db()
    return str(evaluation.dispatch_token)


def test_enqueue_publishes_once_with_the_payload_only(make_evaluation, sent):
    ev = make_evaluation()
    token = published(ev, sent)
    assert not publish.enqueue(ev.pk)  # a second call publishes nothing
    (message,) = sent.sent
    assert message["token"] == token and message["evaluation"] == ev.pk
    assert set(message) == {"evaluation", "token", "problem", "code", "world_size", "mode", "profile", "settings",
                            "countdown"}  # fmt: skip
    assert (message["problem"], message["code"], message["mode"], message["profile"]) == (
        "allreduce",
        CODE,
        "cpu",
        "h100",
    )
    assert message["settings"]["shapes"] == ["default"]  # cpu mode: the default shape only


def test_a_failed_publication_is_published_again_by_the_reaper(make_evaluation, sent, settings):
    ev = make_evaluation(queued_at=timezone.now() - timedelta(seconds=settings.PKB_UNPUBLISHED_AFTER_S + 1))
    sent.fail = True
    assert not publish.enqueue(ev.pk)
    ev.refresh_from_db()
    assert ev.dispatch_token is None and ev.state == "queued"
    sent.fail = False
    assert reaper.reap()["published"] == 1
    ev.refresh_from_db()
    assert ev.dispatch_token is not None and len(sent.sent) == 1


def test_progress_is_conditional_on_the_token_and_only_moves_forward(make_evaluation, sent):
    ev = make_evaluation()
    token = published(ev, sent)
    assert not tasks.record_stage(ev.pk, str(uuid.uuid4()), "starting", "intruder")
    assert tasks.record_stage(ev.pk, token, "starting", "gpu-a")
    assert tasks.record_stage(ev.pk, token, "timing", "gpu-a")
    assert not tasks.record_stage(ev.pk, token, "building", "gpu-a")  # late message for an earlier stage
    assert tasks.heartbeat(ev.pk, token)
    ev.refresh_from_db()
    assert (ev.state, ev.stage, ev.attempts, ev.worker) == ("running", "timing", 1, "gpu-a")
    assert ev.heartbeat_at is not None


def test_a_result_delivered_twice_is_stored_once(make_evaluation, sent):
    ev = make_evaluation()
    token = published(ev, sent)
    tasks.record_stage(ev.pk, token, "starting", "gpu-a")
    first = document("correct")
    assert tasks.store_result(ev.pk, token, first)
    assert not tasks.store_result(ev.pk, token, first)
    assert not tasks.store_result(ev.pk, token, document("incorrect"))
    ev.refresh_from_db()
    assert (ev.state, ev.stage, ev.status, ev.correct, ev.speedup) == ("done", "done", "correct", True, 2.0)
    assert ev.result == first and ev.finished_at is not None
    assert ev.output_digest == transitions.output_digest(Result.from_dict(first)) and len(ev.output_digest) == 64


def test_a_result_that_overtook_its_claim_is_stored_and_counts_the_attempt(make_evaluation, sent):
    ev = make_evaluation()
    token = published(ev, sent)
    assert tasks.store_result(ev.pk, token, document("incorrect"))
    assert not tasks.record_stage(ev.pk, token, "starting", "gpu-a")  # the late claim changes nothing
    ev.refresh_from_db()
    assert (ev.state, ev.status, ev.correct, ev.attempts) == ("done", "incorrect", False, 1)


def test_failure_reports_that_overtook_their_claims_count_toward_the_cap(make_evaluation, sent):
    ev = make_evaluation()
    token = published(ev, sent)
    for attempt in (1, 2):
        assert tasks.report_failure(ev.pk, token, "CUDA driver error", True) == "requeued"
        assert not tasks.record_stage(ev.pk, token, "starting", "gpu-a")  # late, and its token is stale now
        ev.refresh_from_db()
        assert (ev.state, ev.attempts) == ("queued", attempt)
        assert sent.sent[-1]["countdown"] == 10 * attempt
        token = str(ev.dispatch_token)
    assert tasks.report_failure(ev.pk, token, "CUDA driver error", True) == "failed"
    ev.refresh_from_db()
    assert (ev.state, ev.attempts) == ("failed", 3)
    assert ev.reason == "gave up after 3 attempts: CUDA driver error"


def test_a_final_failure_that_overtook_its_claim_counts_the_attempt(make_evaluation, sent):
    ev = make_evaluation()
    token = published(ev, sent)
    assert tasks.report_failure(ev.pk, token, "the solution's build directory is unwritable", False) == "failed"
    ev.refresh_from_db()
    assert (ev.state, ev.attempts) == ("failed", 1)


@pytest.mark.parametrize(
    "doc, reason",
    [({"schema": "bogus"}, "invalid result document"), (document(problem="allgather"), "problem='allgather'")],
)
def test_a_malformed_or_foreign_result_fails_the_evaluation(make_evaluation, sent, doc, reason):
    ev = make_evaluation()
    token = published(ev, sent)
    tasks.record_stage(ev.pk, token, "starting", "gpu-a")
    assert not tasks.store_result(ev.pk, token, doc)
    ev.refresh_from_db()
    assert ev.state == "failed" and reason in ev.reason and ev.result is None


def test_infrastructure_failures_are_retried_under_a_fresh_token_then_given_up(make_evaluation, sent):
    ev = make_evaluation()
    token = published(ev, sent)
    for attempt in (1, 2):
        tasks.record_stage(ev.pk, token, "starting", "gpu-a")
        assert tasks.report_failure(ev.pk, token, "CUDA driver error", True) == "requeued"
        ev.refresh_from_db()
        assert (ev.state, ev.attempts) == ("queued", attempt) and str(ev.dispatch_token) != token
        assert sent.sent[-1]["countdown"] == 10 * attempt
        stale, token = token, str(ev.dispatch_token)
        assert not tasks.store_result(ev.pk, stale, document())  # the abandoned delivery cannot store
    tasks.record_stage(ev.pk, token, "starting", "gpu-a")
    assert tasks.report_failure(ev.pk, token, "CUDA driver error", True) == "failed"
    ev.refresh_from_db()
    assert ev.state == "failed" and ev.reason == "gave up after 3 attempts: CUDA driver error"
    assert len(sent.sent) == 3


def test_a_refused_request_fails_without_retry(make_evaluation, sent):
    ev = make_evaluation()
    token = published(ev, sent)
    tasks.record_stage(ev.pk, token, "starting", "gpu-a")
    assert tasks.report_failure(ev.pk, token, "unknown shape", False) == "failed"
    ev.refresh_from_db()
    assert (ev.state, ev.reason, len(sent.sent)) == ("failed", "unknown shape", 1)


def test_redelivery_of_a_delivery_that_never_started_is_republished_for_free(make_evaluation, sent):
    ev = make_evaluation()
    token = published(ev, sent)
    assert transitions.redelivered(ev.pk, token, "gpu-b") == "republished"
    ev.refresh_from_db()
    assert (str(ev.dispatch_token), ev.attempts, len(sent.sent)) == (token, 0, 2)


def test_redelivery_while_the_worker_still_beats_waits_for_the_lease(make_evaluation, sent, settings):
    ev = make_evaluation()
    token = published(ev, sent)
    tasks.record_stage(ev.pk, token, "starting", "gpu-a")
    assert transitions.redelivered(ev.pk, token, "gpu-b") == "watching"
    assert transitions.check_lease(ev.pk, token) == "unchanged"
    type(ev).objects.filter(pk=ev.pk).update(heartbeat_at=timezone.now() - timedelta(seconds=settings.PKB_LEASE_S + 1))
    assert transitions.check_lease(ev.pk, token) == "requeued"
    ev.refresh_from_db()
    assert ev.state == "queued" and "gpu-a lost" in ev.reason and str(ev.dispatch_token) != token


def test_the_reaper_requeues_silent_and_overrunning_evaluations_and_fails_at_the_cap(make_evaluation, sent, settings):
    now = timezone.now()
    long_ago = now - timedelta(seconds=settings.PKB_EVAL_HARD_LIMIT_S + settings.PKB_EVAL_SLACK_S + 1)
    silent, overrun, spent, healthy, done = (make_evaluation() for _ in range(5))
    tokens = {ev.pk: published(ev, sent) for ev in (silent, overrun, spent, healthy, done)}
    for ev in (silent, overrun, spent, healthy, done):
        tasks.record_stage(ev.pk, tokens[ev.pk], "starting", "gpu-a")
    tasks.store_result(done.pk, tokens[done.pk], document())
    model = type(silent).objects
    stale = now - timedelta(seconds=settings.PKB_LEASE_S + 1)
    model.filter(pk=silent.pk).update(heartbeat_at=stale)
    model.filter(pk=overrun.pk).update(started_at=long_ago)  # heartbeats fine, but past the hard limit
    model.filter(pk=spent.pk).update(heartbeat_at=stale, attempts=settings.PKB_MAX_ATTEMPTS)
    model.filter(pk=done.pk).update(heartbeat_at=stale)

    assert reaper.reap() == {"requeued": 2, "failed": 1}
    states = dict(model.filter(pk__in=tokens).values_list("pk", "state"))
    assert states == {silent.pk: "queued", overrun.pk: "queued", spent.pk: "failed", healthy.pk: "running",
                      done.pk: "done"}  # fmt: skip
    assert reaper.reap() == {}  # nothing left to do: the reaper is idempotent


def test_queue_position_and_backlog_follow_the_queue(make_evaluation, sent, hardware):
    from catalog.sync import hardware_from_profile

    other = hardware_from_profile("othercpu", "h100", 2, mode="cpu")
    other.save()
    now = timezone.now()
    first, second, third = (make_evaluation(queued_at=now + timedelta(seconds=i)) for i in range(3))
    elsewhere = make_evaluation(hw=other)
    assert [positions.queue_position(e) for e in (first, second, third, elsewhere)] == [1, 2, 3, 1]
    assert (positions.backlog(hardware), positions.backlog(other)) == (3, 1)
    token = published(first, sent)
    tasks.record_stage(first.pk, token, "starting", "gpu-a")
    first.refresh_from_db()
    second.refresh_from_db()
    assert (positions.queue_position(first), positions.queue_position(second), positions.backlog(hardware)) == (
        None,
        1,
        2,
    )


def test_the_embedded_default_evaluates_on_cpu_or_on_every_gpu(db):
    from catalog.models import Hardware
    from dispatch import embedded

    assert embedded.local_hardware([]) == embedded.LocalHardware("cpu", "h100", 2, "cpu")
    gpus = embedded.local_hardware(["NVIDIA H200"] * 4)
    assert gpus == embedded.LocalHardware("h200x4", "h200", 4, "gpu")
    assert embedded.ensure_hardware(gpus) and not embedded.ensure_hardware(gpus)
    assert Hardware.objects.get(slug="h200x4").queue == "gpu.h200x4"
    password = embedded.ensure_admin()
    assert password and embedded.ensure_admin() is None


def test_worker_hides_its_environment_from_solutions():
    """A solution runs as the worker's user; the worker's /proc/<pid>/environ holds the broker
    credentials. A non-dumpable process's /proc files belong to root, out of the solution's reach."""
    import subprocess
    import sys

    code = (
        "import ctypes; from evaluator.worker import hide_from_solutions; hide_from_solutions();"
        "print(ctypes.CDLL(None).prctl(3, 0, 0, 0, 0))"  # PR_GET_DUMPABLE
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "0"
