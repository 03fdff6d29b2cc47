"""The web queue's tasks: what GPU workers send back, and the reaper. Each is idempotent (a
conditional update keyed on the dispatch token), acknowledged late, and retried while the database
is unreachable, so neither a redelivery nor a database restart loses or doubles anything."""

from __future__ import annotations

from celery import shared_task
from django.conf import settings
from django.db import InterfaceError, OperationalError

from dispatch import presence, reaper, transitions
from evaluator import worker as names

DATABASE_DOWN = {
    "autoretry_for": (OperationalError, InterfaceError),
    "retry_backoff": 1,
    "retry_backoff_max": 30,
    "retry_jitter": False,
    "max_retries": 200,
    "acks_late": True,
}


@shared_task(name=names.RECORD_STAGE, **DATABASE_DOWN)
def record_stage(evaluation_id: int, token: str, stage: str, worker: str = "") -> bool:
    return transitions.record_stage(evaluation_id, token, stage, worker)


@shared_task(name=names.HEARTBEAT, **DATABASE_DOWN)
def heartbeat(evaluation_id: int, token: str, worker: str = "") -> bool:
    return transitions.heartbeat(evaluation_id, token)


@shared_task(name=names.STORE_RESULT, **DATABASE_DOWN)
def store_result(evaluation_id: int, token: str, document: dict) -> bool:
    return transitions.store_result(evaluation_id, token, document)


@shared_task(name=names.REPORT_FAILURE, **DATABASE_DOWN)
def report_failure(evaluation_id: int, token: str, reason: str, retry: bool = True) -> str:
    return transitions.report_failure(evaluation_id, token, reason, retry)


@shared_task(name=names.REDELIVERED, **DATABASE_DOWN)
def redelivered(evaluation_id: int, token: str, worker: str = "") -> str:
    outcome = transitions.redelivered(evaluation_id, token, worker)
    if outcome == "watching":
        # Its worker was alive a moment ago: look again once the lease would have run out.
        check_lease.apply_async((evaluation_id, token), countdown=settings.PKB_LEASE_S + 1)
    return outcome


@shared_task(name="dispatch.tasks.check_lease", **DATABASE_DOWN)
def check_lease(evaluation_id: int, token: str) -> str:
    return transitions.check_lease(evaluation_id, token)


@shared_task(name="dispatch.tasks.reap", **DATABASE_DOWN)
def reap() -> dict:
    return dict(reaper.reap())


@shared_task(name=names.WORKER_ALIVE, **DATABASE_DOWN)
def worker_alive(worker: str, hardware: str, online: bool = True, interval_s: float = 30.0) -> None:
    presence.record(worker, hardware, bool(online), float(interval_s))
