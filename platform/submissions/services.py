"""Creating submissions and evaluations: the one path used by the submit page, the API and the admin."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction
from django.utils import timezone

from catalog.models import Hardware, Problem, world_size_for
from common.text import neutralize
from evaluator.results import Stage
from submissions.models import BACKENDS, MODEL_TAG, Evaluation, ModelName, Submission
from submissions.signals import evaluations_queued
from submissions.validation import validate_code


class RateLimited(Exception):
    def __init__(self, limit: int, retry_after_s: int):
        super().__init__(f"at most {limit} submissions per hour; try again in {retry_after_s // 60 + 1} minutes")
        self.retry_after_s = retry_after_s


@dataclass(frozen=True)
class NewSubmission:
    problem: Problem
    model_tag: str
    backend: str
    code: bytes | str
    hardware: list[Hardware]
    sample_index: int = 0
    run_label: str = ""


def check_rate_limit(user) -> None:
    """Staff are exempt; everyone else gets PKB_SUBMISSIONS_PER_HOUR in any sliding hour. Call inside a transaction."""
    if user.is_staff:
        return
    limit = settings.PKB_SUBMISSIONS_PER_HOUR
    # Lock the user's row so two concurrent requests cannot both take the last slot.
    get_user_model().objects.select_for_update().filter(pk=user.pk).first()
    since = timezone.now() - timedelta(hours=1)
    recent = list(
        Submission.objects.filter(owner=user, created_at__gte=since)
        .order_by("-created_at")
        .values_list("created_at", flat=True)[:limit]
    )
    if len(recent) >= limit:
        retry = int((recent[-1] + timedelta(hours=1) - timezone.now()).total_seconds())
        raise RateLimited(limit, max(retry, 1))


def announce_on_commit(evaluation_ids: list[int]) -> None:
    """Announce the evaluations once the transaction that created their rows has committed."""
    ids = list(evaluation_ids)

    def announce() -> None:
        if not evaluations_queued.send(sender=Evaluation, evaluation_ids=ids):
            # The rows stay queued, but nothing would ever publish them.
            raise RuntimeError("nothing publishes queued evaluations: the dispatch app is not installed")

    if ids:
        transaction.on_commit(announce)


def create_submission(owner, new: NewSubmission) -> Submission:
    """Validate, check the rate limit, store the code, create one queued evaluation per hardware and
    publish them after commit. Raises InvalidCode, RateLimited or ValueError; stores nothing then."""
    code = validate_code(new.code)
    if new.backend not in BACKENDS:
        raise ValueError(f"backend must be one of {', '.join(BACKENDS)}")
    if not new.hardware:
        raise ValueError("choose at least one hardware")
    with transaction.atomic():
        check_rate_limit(owner)
        submission = Submission.objects.create(
            problem=new.problem,
            owner=owner,
            model_tag=new.model_tag,
            backend=new.backend,
            code=code,
            sample_index=new.sample_index,
            run_label=neutralize(new.run_label).strip(),
        )
        queue_evaluations([submission], new.hardware[0], requested_by=owner, extra_hardware=new.hardware[1:])
    return submission


def queue_evaluations(submissions, hardware: Hardware, requested_by=None, extra_hardware=()) -> list[Evaluation]:
    """Queue one evaluation of each submission on each hardware (reruns included), except where one
    is already queued or running there: a rerun never doubles a run that has not finished. Returns
    the evaluations created."""
    submissions = list(submissions)
    targets = list({hw.pk: hw for hw in (hardware, *extra_hardware)}.values())
    ids = [s.pk for s in submissions]
    now = timezone.now()
    with transaction.atomic():
        # Locked, so that of two concurrent reruns of a submission only one finds nothing active.
        list(Submission.objects.select_for_update().filter(pk__in=ids).order_by("pk").values_list("pk", flat=True))
        active = set(
            Evaluation.objects.filter(
                submission_id__in=ids, hardware__in=targets, state__in=("queued", "running")
            ).values_list("submission_id", "hardware_id")
        )
        rows = [
            Evaluation(
                submission=s,
                hardware=hw,
                problem_id=s.problem_id,
                model_tag=s.model_tag,
                world_size=world_size_for(s.problem, hw),
                mode=hw.mode,
                state="queued",
                stage=Stage.QUEUED.value,
                queued_at=now,
                requested_by=requested_by,
            )
            for s in submissions
            for hw in targets
            if (s.pk, hw.pk) not in active
        ]
        created = Evaluation.objects.bulk_create(rows)
        announce_on_commit([e.pk for e in created])
    return created


def reject(submission_ids, reason: str) -> int:
    """Hide every evaluation of these submissions from rankings, keeping them for the record."""
    return Evaluation.objects.filter(submission_id__in=list(submission_ids)).update(hidden=True, rejected_reason=reason)


class NameTaken(ValueError):
    """A model name someone else registered (case aside)."""


def register_model_name(owner, name: str) -> ModelName:
    """`owner` registers the model tag `name`: from then on, comparisons count the runs under it that
    `owner` vouches for (its own, and those of the accounts it names). First come, first served;
    admins can hand a name over. Raises ValueError (a bad tag) or NameTaken."""
    if not re.fullmatch(MODEL_TAG, name):
        raise ValueError("a model name is 1 to 100 letters, digits and . _ : / + @ -, starting with a letter or digit")
    try:
        with transaction.atomic():
            if (taken := ModelName.objects.filter(name__iexact=name).select_related("owner").first()) is not None:
                raise NameTaken(f"{taken.name!r} is registered by {taken.owner.username}")
            return ModelName.objects.create(name=name, owner=owner)
    except IntegrityError:  # registered meanwhile
        raise NameTaken(f"{name!r} is already registered") from None


def vouch_for(model_name: ModelName, usernames: list[str]) -> list[str]:
    """The accounts (besides its owner) whose runs under `model_name` its owner vouches for, replaced
    by `usernames`. Returns the usernames that name no account (nothing changes then)."""
    wanted = {u.strip() for u in usernames if u.strip()} - {model_name.owner.username}
    users = list(get_user_model().objects.filter(username__in=wanted))
    unknown = sorted(wanted - {u.username for u in users})
    if not unknown:
        model_name.vouched_accounts.set(users)
    return unknown
