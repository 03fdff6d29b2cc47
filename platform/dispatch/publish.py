"""Publishing evaluations on their hardware's queue.

Each publication carries a fresh dispatch token, written on the row before the message leaves:
only deliveries of that message may move the row on (see transitions.py). A publication that
fails (broker down) gives the token back, so the reaper publishes the evaluation again later.
"""

from __future__ import annotations

import logging
import uuid

from celery import current_app
from django.conf import settings
from django.db.models import Case, F, PositiveIntegerField, When
from django.utils import timezone

from evaluator.results import Stage
from evaluator.worker import EVALUATE_TASK, declare_queue
from submissions.models import Evaluation

log = logging.getLogger("pkb.dispatch")

# The web request that publishes waits at most a few seconds for a broker that is down.
PUBLISH_RETRY = {"max_retries": 3, "interval_start": 0.2, "interval_step": 0.5, "interval_max": 1.0}


def evaluation_settings(evaluation: Evaluation) -> dict:
    """The evaluator settings for this evaluation's mode (see PKB_EVAL_SETTINGS)."""
    per_mode = dict(settings.PKB_EVAL_SETTINGS.get(evaluation.mode) or {})
    shapes = per_mode.pop("shapes", "all")
    chosen = None
    if shapes == "default":
        problem_shapes = evaluation.submission.problem.shapes or []
        chosen = [s["name"] for s in problem_shapes if s.get("default")][:1] or None
    elif shapes and shapes != "all":
        chosen = [name.strip() for name in str(shapes).split(",") if name.strip()]
    return {
        **{k: v for k, v in per_mode.items() if v is not None},
        "shapes": chosen,
        "timeout_s": settings.PKB_EVAL_TIMEOUT_S,
    }


def payload(evaluation: Evaluation) -> dict:
    """All a GPU worker gets: code, problem id, settings, evaluation id and dispatch token."""
    submission = evaluation.submission
    return {
        "evaluation": evaluation.pk,
        "token": str(evaluation.dispatch_token),
        "problem": submission.problem.slug,
        "code": submission.code,
        "world_size": evaluation.world_size,
        "mode": evaluation.mode,
        "profile": evaluation.hardware.profile,
        "settings": evaluation_settings(evaluation),
    }


def _load(evaluation_id: int) -> Evaluation:
    return Evaluation.objects.select_related("submission__problem", "hardware").get(pk=evaluation_id)


def publish(evaluation: Evaluation, countdown: float = 0) -> None:
    """Send the evaluation's task to gpu.<hardware>. Raises if the broker cannot take it."""
    current_app.send_task(
        EVALUATE_TASK,
        args=[payload(evaluation)],
        queue=declare_queue(evaluation.hardware.queue),
        time_limit=settings.PKB_EVAL_HARD_LIMIT_S,
        soft_time_limit=settings.PKB_EVAL_SOFT_LIMIT_S,
        countdown=countdown or None,
        retry=True,
        retry_policy=PUBLISH_RETRY,
    )


def publish_or_release(evaluation_id: int, token: uuid.UUID, countdown: float = 0) -> bool:
    """Publish the evaluation with `token`; on failure clear the token so the reaper retries."""
    try:
        evaluation = _load(evaluation_id)
        if evaluation.dispatch_token != token or evaluation.state != "queued":
            return False
        publish(evaluation, countdown)
    except Exception:
        log.exception("evaluation %s: could not publish; the reaper will publish it again", evaluation_id)
        Evaluation.objects.filter(pk=evaluation_id, dispatch_token=token, state="queued").update(dispatch_token=None)
        return False
    log.info("evaluation %s: published (token %s)", evaluation_id, token)
    return True


def enqueue(evaluation_id: int) -> bool:
    """Publish a queued evaluation that has not been published yet. Calling it again is a no-op."""
    token = uuid.uuid4()
    taken = Evaluation.objects.filter(pk=evaluation_id, state="queued", dispatch_token__isnull=True).update(
        dispatch_token=token
    )
    if not taken:
        log.info("evaluation %s: not queued or already published", evaluation_id)
        return False
    return publish_or_release(evaluation_id, token)


def publish_queued(sender, evaluation_ids, **kwargs) -> None:
    """Receives the submissions app's `evaluations_queued`: publish each evaluation, once."""
    for evaluation_id in evaluation_ids:
        enqueue(evaluation_id)


def unclaimed_attempt() -> Case:
    """A row's attempts after a message that proves its delivery started (a result, a failure
    report): one more if the row is still queued, since its claim was overtaken (web workers racing)
    and, finding the row moved on, will change nothing."""
    return Case(
        When(state="queued", then=F("attempts") + 1), default=F("attempts"), output_field=PositiveIntegerField()
    )


def requeue(evaluation_id: int, old_token: uuid.UUID, reason: str, countdown: float = 0) -> bool:
    """Put a started evaluation back in its queue under a fresh token, so that whatever the previous
    delivery still sends is ignored. Conditional on the old token: of two callers, one wins."""
    token = uuid.uuid4()
    moved = Evaluation.objects.filter(
        pk=evaluation_id, dispatch_token=old_token, state__in=("queued", "running")
    ).update(
        state="queued",
        stage=Stage.QUEUED.value,
        attempts=unclaimed_attempt(),  # a failure report that overtook its claim
        dispatch_token=token,
        worker="",
        heartbeat_at=None,
        started_at=None,
        queued_at=timezone.now(),
        reason=f"retrying: {reason}"[:2000],
    )
    if not moved:
        return False
    log.warning("evaluation %s: requeued (%s)", evaluation_id, reason)
    publish_or_release(evaluation_id, token, countdown)
    return True
