"""Fixtures for the web platform's tests. They run on PostgreSQL (pkb_site.test_settings: the
PKB_DATABASE_URL server, else the local one); the broker is replaced by a recorder and the GPU worker by a double that
moves evaluations through the dispatch app's own stage and result functions."""

from __future__ import annotations

import uuid

import pytest
from django.db import connection


@pytest.fixture(autouse=True)
def _web_settings(settings):
    settings.PKB_SUBMISSIONS_PER_HOUR = 50


@pytest.fixture(autouse=True)
def _on_postgresql(request):
    if "db" in request.fixturenames or request.node.get_closest_marker("django_db"):
        assert connection.vendor == "postgresql", "the web tests run on PostgreSQL (PKB_DATABASE_URL)"


class Broker:
    """Stands in for the dispatch app's receiver of `evaluations_queued`: marks each row published
    (a fresh token, as the dispatch app does) and remembers what was sent."""

    def __init__(self):
        self.sent: list[int] = []

    def receive(self, sender, evaluation_ids, **kwargs) -> None:
        for evaluation_id in evaluation_ids:
            self.enqueue(evaluation_id)

    def enqueue(self, evaluation_id: int) -> None:
        from submissions.models import Evaluation

        Evaluation.objects.filter(pk=evaluation_id, state="queued", dispatch_token__isnull=True).update(
            dispatch_token=uuid.uuid4()
        )
        self.sent.append(evaluation_id)


@pytest.fixture(autouse=True)
def broker():
    from dispatch.apps import PUBLISH_QUEUED
    from dispatch.publish import publish_queued
    from submissions.signals import evaluations_queued

    fake = Broker()
    evaluations_queued.disconnect(dispatch_uid=PUBLISH_QUEUED)
    evaluations_queued.connect(fake.receive, dispatch_uid="test-broker")
    yield fake
    evaluations_queued.disconnect(dispatch_uid="test-broker")
    evaluations_queued.connect(publish_queued, dispatch_uid=PUBLISH_QUEUED)


class Worker:
    """A GPU worker double: claims, reports stages and stores results through dispatch.tasks."""

    name = "test-worker"

    def _token(self, ev) -> str:
        ev.refresh_from_db()
        assert ev.dispatch_token, "the evaluation was never published"
        return str(ev.dispatch_token)

    def stage(self, ev, stage: str) -> None:
        from dispatch.tasks import record_stage

        assert record_stage(ev.pk, self._token(ev), stage, self.name)

    def finish(self, ev, doc: dict) -> None:
        from dispatch.tasks import record_stage, store_result

        token = self._token(ev)
        if ev.state == "queued":
            record_stage(ev.pk, token, "starting", self.name)
        assert store_result(ev.pk, token, doc)
        ev.refresh_from_db()


@pytest.fixture
def worker():
    return Worker()


def result_document(
    ev,
    status: str = "correct",
    speedups=(1.5, 2.0, 3.0),
    utilization=0.5,
    digest: str = "a",
    reason: str = "",
    interval: float | None = None,
) -> dict:
    """A valid result document for this evaluation's problem, mode and world size. `interval`:
    each shape's speedup interval is [speedup / (1 + interval), speedup * (1 + interval)]."""
    from evaluator import results
    from evaluator.results import Mode, Result, ShapeResult, Status
    from evaluator.timing_stats import TimingStop

    status = Status(status)
    correct = status is Status.CORRECT
    ranks = ev.world_size
    shapes = []
    for shape, speedup in zip(ev.submission.problem.shapes, speedups, strict=False):
        ref_us = 100.0 * (len(shapes) + 1)
        sol_us = ref_us / speedup if correct else None
        roof = (
            results.Roofline(
                t_roof_us=sol_us * utilization, bound=results.Resource.NVLINK, phases=[], utilization=utilization
            )
            if correct
            else None
        )
        shapes.append(
            ShapeResult(
                name=shape["name"],
                dims=shape["dims"],
                default=shape.get("default", False),
                correct=correct if status in (Status.CORRECT, Status.INCORRECT) else None,
                max_abs_error=0.001 if correct else (0.5 if status is Status.INCORRECT else None),
                solution=results.timing([[sol_us] * 3] * ranks) if correct else None,
                reference=results.timing([[ref_us] * 3] * ranks),
                speedup=speedup if correct else None,
                speedup_interval=[speedup / (1 + interval), speedup * (1 + interval)]
                if correct and interval is not None
                else None,
                roofline=roof,
                digests=results.Digests(solution=[digest * 64] * ranks, reference=["r" * 64] * ranks),
                notes=[],
                timing_run=results.TimingRun(
                    calls_per_batch=1, pairs=3, fixed_us=10.0, stop=TimingStop.FIXED, seconds=0.1,
                    pairs_us=[[ref_us, sol_us * f] for f in (1.0, 1.25, 0.8)],
                )
                if correct
                else None,
            )
        )
    mode = Mode(ev.mode)
    return Result(
        status=status,
        reason=reason or ("" if correct else f"{status} on rank 1"),
        failing_rank=None if correct else 1,
        problem=ev.submission.problem.slug,
        mode=mode,
        world_size=ranks,
        hardware=ev.hardware.slug,
        timings_meaningful=mode.timings_meaningful,
        settings=results.Settings(warmup=3, iters=3, trials=2, timeout_s=60.0),
        shapes=shapes,
        summary=results.summarize(shapes, status),
        stages={},
        environment={"torch": "test", "sandboxed": True},
        log_tail="compiler output: secret-ish line",
        started_at="",
        finished_at="",
    ).to_dict()


@pytest.fixture
def make_result():
    return result_document


@pytest.fixture
def problem(db):
    from catalog.models import Problem

    shapes = [
        {"name": "small", "dims": {"M": 64, "N": 1024}, "default": False},
        {"name": "default", "dims": {"M": 1024, "N": 1024}, "default": True},
        {"name": "large", "dims": {"M": 8192, "N": 8192}, "default": False},
    ]
    return Problem.objects.create(
        slug="allreduce",
        pkb_id=1,
        title="All-reduce",
        level=1,
        parallelism="collective",
        origin="NCCL",
        description="Sum over ranks.",
        shapes=shapes,
        world_sizes=[2, 4, 8],
        tolerance="atol=0.1, rtol=0.02",
        reference_source="import torch\n\ndef solution(t):\n    return t\n",
    )


@pytest.fixture
def other_problem(db):
    from catalog.models import Problem

    shapes = [
        {"name": n, "dims": {"M": m}, "default": n == "default"}
        for n, m in (("small", 64), ("default", 1024), ("large", 8192))
    ]
    return Problem.objects.create(
        slug="allgather",
        pkb_id=2,
        title="All-gather",
        level=2,
        parallelism="TP",
        shapes=shapes,
        world_sizes=[2, 4, 8],
        tolerance="bitwise",
        bitwise=True,
        reference_source="def solution(t):\n    return t\n",
    )


@pytest.fixture
def cpu(db):
    from catalog.models import Hardware
    from catalog.sync import ensure_cpu_hardware

    ensure_cpu_hardware()  # a migration creates it, but transactional tests flush the tables
    return Hardware.objects.get(slug="cpu")


@pytest.fixture
def h200(db):
    from catalog.sync import hardware_from_profile

    hw = hardware_from_profile("h200x4", "h200", 4)
    hw.save()
    return hw


@pytest.fixture
def user(django_user_model):
    return django_user_model.objects.create_user("alice", password="correct horse battery")


@pytest.fixture
def other_user(django_user_model):
    return django_user_model.objects.create_user("bob", password="correct horse battery")


@pytest.fixture
def admin_user(django_user_model):
    return django_user_model.objects.create_superuser("admin", "admin@example.org", "correct horse battery")


GOOD_CODE = "import torch\n\n\ndef solution(tensor):\n    return tensor\n"


@pytest.fixture
def good_code():
    return GOOD_CODE


@pytest.fixture
def submit(broker):
    """Create a submission through the service (as the pages and API do) with queued evaluations.
    Its model tag is registered to its owner unless someone registered it already (comparisons
    count only the runs a model name's owner vouches for; test_model_names.py tests that)."""
    from submissions.models import ModelName
    from submissions.services import NewSubmission, create_submission

    def make(owner, problem, hardware, model_tag="gpt-5.5", code=GOOD_CODE, sample_index=0, backend="pytorch"):
        if not ModelName.objects.filter(name__iexact=model_tag).exists():
            ModelName.objects.create(name=model_tag, owner=owner)
        hardware = hardware if isinstance(hardware, list) else [hardware]
        new = NewSubmission(
            problem=problem,
            model_tag=model_tag,
            backend=backend,
            code=code,
            hardware=hardware,
            sample_index=sample_index,
        )
        sub = create_submission(owner, new)
        for ev in sub.evaluations.all():  # what on_commit does once the transaction commits
            broker.enqueue(ev.pk)
        return sub

    return make


@pytest.fixture
def judged(submit, worker, make_result):
    """A submission whose evaluation on one hardware is done with the given outcome."""

    def make(owner, problem, hardware, status="correct", speedups=(1.5, 2.0, 3.0), model_tag="gpt-5.5",
             interval=None, **kw):
        sub = submit(owner, problem, hardware, model_tag=model_tag, **kw)
        ev = sub.evaluations.get()
        worker.finish(ev, make_result(ev, status=status, speedups=speedups, interval=interval))
        return ev

    return make
