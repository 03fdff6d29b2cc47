"""The reaper: nothing waits forever and nothing is lost.

- running, worker silent past the lease (PKB_LEASE_S): the worker is presumed lost;
- running longer than the hard time limit plus slack, heartbeats or not: stuck;
  both are run again under a fresh token, or failed once PKB_MAX_ATTEMPTS deliveries started;
- queued but never published (the broker was down when it was submitted): published.

Runs on the scheduler every PKB_REAP_INTERVAL_S, and once with `manage.py reap_evaluations`.
Safe to run concurrently with itself and with workers: every change is a conditional update.
"""

from __future__ import annotations

import logging
from collections import Counter
from datetime import timedelta

from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from dispatch import publish, transitions
from submissions.models import Evaluation

log = logging.getLogger("pkb.dispatch")


def reap(now=None) -> Counter:
    now = now or timezone.now()
    counts: Counter = Counter()
    lease_cut = now - timedelta(seconds=settings.PKB_LEASE_S)
    stuck_cut = now - timedelta(seconds=settings.PKB_EVAL_HARD_LIMIT_S + settings.PKB_EVAL_SLACK_S)
    silent = Q(heartbeat_at__lt=lease_cut) | Q(heartbeat_at__isnull=True, started_at__lt=lease_cut)
    for evaluation in Evaluation.objects.filter(silent, state="running").order_by("pk"):
        reason = f"worker {evaluation.worker or '?'} lost (no heartbeat for {settings.PKB_LEASE_S:g} s)"
        counts[transitions.recover(evaluation, reason)] += 1
    for evaluation in Evaluation.objects.filter(state="running", started_at__lt=stuck_cut).order_by("pk"):
        reason = f"still running {settings.PKB_EVAL_HARD_LIMIT_S:g} s after it started on {evaluation.worker or '?'}"
        counts[transitions.recover(evaluation, reason)] += 1
    unpublished_cut = now - timedelta(seconds=settings.PKB_UNPUBLISHED_AFTER_S)
    for evaluation_id in Evaluation.objects.filter(
        state="queued", dispatch_token__isnull=True, queued_at__lt=unpublished_cut
    ).values_list("pk", flat=True):
        counts["published" if publish.enqueue(evaluation_id) else "unchanged"] += 1
    counts.pop("unchanged", None)
    if counts:
        log.warning("reaper: %s", dict(counts))
    return counts
