"""Every change of an evaluation's state, each one conditional update keyed on the dispatch token.

    queued --claim--> running --store_result--> done
       ^                 |--report_failure / lost worker--> queued (fresh token) | failed (cap reached)

A message is acted on only while the row is queued or running *and* carries the message's token.
So a result delivered twice is stored once, and whatever a delivery that was given up on still
sends (a worker presumed lost, a copy handed out again after a broker restart) changes nothing.
`store_result` also accepts a queued row with its token: the web queue may run the claim after the
result when several web workers race. A result or failure report that overtook its claim proves the
delivery started, so it counts the attempt the late claim no longer can (`publish.unclaimed_attempt`).
"""

from __future__ import annotations

import hashlib
import logging
import uuid
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db.models import Case, F, Value, When
from django.utils import timezone

from dispatch import publish
from evaluator.results import InvalidResult, Result, Stage
from submissions.models import Evaluation

log = logging.getLogger("pkb.dispatch")

ACTIVE = ("queued", "running")
STAGES = [s.value for s in Stage]
# What a worker reports while it runs ("starting" is its claim); "done" comes with the result.
PROGRESS_STAGES = STAGES[STAGES.index(Stage.STARTING) : STAGES.index(Stage.DONE)]


def as_token(value: Any) -> uuid.UUID | None:
    try:
        return value if isinstance(value, uuid.UUID) else uuid.UUID(str(value))
    except (TypeError, ValueError):
        return None


def active(evaluation_id: int, token: Any):
    """The queryset a message from the delivery `token` may change: empty if the token is stale."""
    token = as_token(token)
    if token is None:
        return Evaluation.objects.none()
    return Evaluation.objects.filter(pk=evaluation_id, dispatch_token=token, state__in=ACTIVE)


def claim(evaluation_id: int, token: Any, worker: str = "") -> bool:
    """A worker starts this delivery: queued -> running, one more attempt."""
    now = timezone.now()
    claimed = active(evaluation_id, token).update(
        state="running",
        # A stage that arrived before the claim (web workers racing) is not moved back.
        stage=Case(When(stage=Stage.QUEUED.value, then=Value(Stage.STARTING.value)), default=F("stage")),
        attempts=F("attempts") + 1,
        worker=worker[:200],
        started_at=now,
        heartbeat_at=now,
    )
    if claimed:
        log.info("evaluation %s: started on %s", evaluation_id, worker)
    else:
        log.info("evaluation %s: claim by %s ignored (stale token or finished)", evaluation_id, worker)
    return bool(claimed)


def record_stage(evaluation_id: int, token: Any, stage: str, worker: str = "") -> bool:
    if stage == Stage.STARTING:
        return claim(evaluation_id, token, worker)
    if stage not in PROGRESS_STAGES:
        return False
    # Progress only moves forward: a late message for an earlier stage is dropped.
    earlier = STAGES[: STAGES.index(stage) + 1]
    fields: dict[str, Any] = {"state": "running", "stage": Stage(stage).value, "heartbeat_at": timezone.now()}
    if worker:
        fields["worker"] = worker[:200]
    return bool(active(evaluation_id, token).filter(stage__in=earlier).update(**fields))


def heartbeat(evaluation_id: int, token: Any) -> bool:
    return bool(active(evaluation_id, token).filter(state="running").update(heartbeat_at=timezone.now()))


def output_digest(result: Result) -> str | None:
    """SHA-256 over the per-rank solution digests of the default shape: equal digests on two
    machines mean bitwise-equal outputs on the public trial."""
    default = result.default_shape
    if default is None or default.digests is None or not default.digests.solution:
        return None
    return hashlib.sha256("\n".join(default.digests.solution).encode()).hexdigest()


def fail(evaluation_id: int, token: Any, reason: str) -> bool:
    failed = active(evaluation_id, token).update(
        state="failed",
        stage=Stage.DONE.value,
        attempts=publish.unclaimed_attempt(),
        reason=reason[:2000],
        finished_at=timezone.now(),
    )
    if failed:
        log.warning("evaluation %s: failed: %s", evaluation_id, reason)
    return bool(failed)


def mismatch(evaluation: Evaluation, result: Result) -> str | None:
    """A document about another problem, mode or world size is not this evaluation's result."""
    expected = {
        "problem": (evaluation.submission.problem.slug, result.problem),
        "mode": (evaluation.mode, result.mode.value),
        "world_size": (evaluation.world_size, result.world_size),
    }
    for key, (value, got) in expected.items():
        if got != value:
            return f"result document is for {key}={got!r}, expected {value!r}"
    return None


def store_result(evaluation_id: int, token: Any, doc: Any) -> bool:
    """Store a result document once. Returns True if this call stored it."""
    evaluation = active(evaluation_id, token).select_related("submission__problem").first()
    if evaluation is None:
        log.info("evaluation %s: result ignored (already stored, or a stale delivery)", evaluation_id)
        return False
    try:
        result = Result.from_dict(doc)
    except InvalidResult as exc:
        fail(evaluation_id, token, f"invalid result document from the worker: {exc}")
        return False
    problem = mismatch(evaluation, result)
    if problem:
        fail(evaluation_id, token, problem)
        return False
    summary = result.summary
    stored = active(evaluation_id, token).update(
        state="done",
        stage=Stage.DONE.value,
        attempts=publish.unclaimed_attempt(),
        status=result.status.value,
        result=result.to_dict(),
        correct=summary.correct,
        speedup=summary.speedup,
        speedup_low=summary.speedup_interval[0] if summary.speedup_interval else None,
        speedup_high=summary.speedup_interval[1] if summary.speedup_interval else None,
        utilization=summary.utilization,
        solution_us=summary.solution_us,
        reference_us=summary.reference_us,
        output_digest=output_digest(result),
        reason=result.reason[:2000],
        finished_at=timezone.now(),
    )
    if stored:
        log.info("evaluation %s: result stored (%s, token %s)", evaluation_id, result.status, token)
    else:
        log.info("evaluation %s: result ignored (stored concurrently)", evaluation_id)
    return bool(stored)


def recover(evaluation: Evaluation, reason: str, countdown: float = 0) -> str:
    """Run a started evaluation again under a fresh token, or give up once the attempts are spent."""
    if evaluation.attempts < settings.PKB_MAX_ATTEMPTS:
        moved = publish.requeue(evaluation.pk, evaluation.dispatch_token, reason, countdown)
        return "requeued" if moved else "unchanged"
    attempts = "attempt" if evaluation.attempts == 1 else "attempts"
    gave_up = fail(
        evaluation.pk, evaluation.dispatch_token, f"gave up after {evaluation.attempts} {attempts}: {reason}"
    )
    return "failed" if gave_up else "unchanged"


def report_failure(evaluation_id: int, token: Any, reason: str, retry: bool = True) -> str:
    """The evaluator or host broke (never the solution: that is a result). Retried, capped."""
    evaluation = active(evaluation_id, token).first()
    if evaluation is None:
        return "unchanged"
    if not retry:
        return "failed" if fail(evaluation_id, token, reason) else "unchanged"
    if evaluation.state == "queued":  # the report overtook its claim: requeue counts the attempt
        evaluation.attempts += 1
    backoff = settings.PKB_RETRY_BACKOFF_S * max(1, evaluation.attempts)
    return recover(evaluation, reason, countdown=backoff)


def lease_expired(evaluation: Evaluation, now=None) -> bool:
    now = now or timezone.now()
    last = evaluation.heartbeat_at or evaluation.started_at or evaluation.queued_at
    return last < now - timedelta(seconds=settings.PKB_LEASE_S)


def redelivered(evaluation_id: int, token: Any, worker: str = "") -> str:
    """The broker handed out a delivery nobody acknowledged: its worker died, or the broker restarted.
    Never started (row still queued): publish it again, no attempt spent. Started, and its worker
    silent past the lease: the worker is lost, run it again (capped). Started and still alive (a
    broker restart cut the connection of a worker that keeps going): check again when the lease
    would expire."""
    evaluation = active(evaluation_id, token).first()
    if evaluation is None:
        return "unchanged"
    if evaluation.state == "queued":
        # Under the same token: the delivery never started, so nothing of it can come back.
        return "republished" if publish.publish_or_release(evaluation_id, evaluation.dispatch_token) else "unchanged"
    if lease_expired(evaluation):
        return recover(
            evaluation, f"worker {evaluation.worker or '?'} lost (no heartbeat for {settings.PKB_LEASE_S:g} s)"
        )
    return "watching"


def check_lease(evaluation_id: int, token: Any) -> str:
    evaluation = active(evaluation_id, token).filter(state="running").first()
    if evaluation is None or not lease_expired(evaluation):
        return "unchanged"
    return recover(evaluation, f"worker {evaluation.worker or '?'} lost (no heartbeat for {settings.PKB_LEASE_S:g} s)")
