"""Submitting, a submission's page (live while its evaluations run) and one's own submissions."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.db.models import Prefetch
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone

from catalog import examples
from catalog.models import Hardware
from dispatch.positions import backlog, queue_position
from dispatch.presence import serving
from leaderboards.comparisons import submission_outputs
from leaderboards.ranking import is_vouched
from submissions.forms import SubmissionForm
from submissions.models import Evaluation, Submission
from submissions.presenters import evaluation_view, number_runs
from submissions.services import NewSubmission, RateLimited, create_submission

STOP_POLLING = 286  # htmx stops an `every 2s` trigger on this status


@login_required
def submit(request: HttpRequest) -> HttpResponse:
    example = None
    if request.method == "POST":
        form = SubmissionForm(request.POST, request.FILES)
        if form.is_valid():
            data = form.cleaned_data
            new = NewSubmission(
                problem=data["problem"],
                model_tag=data["model_tag"],
                backend=data["backend"],
                code=data["source"],
                hardware=list(data["hardware"]),
                sample_index=data["sample_index"],
                run_label=data["run_label"],
            )
            try:
                submission = create_submission(request.user, new)
            except RateLimited as e:
                form.add_error(None, str(e))
            else:
                return redirect(submission)
    else:
        example = examples.get(request.GET.get("example", ""))
        initial = {"problem": request.GET.get("problem"), "hardware": Hardware.objects.filter(active=True)[:1]}
        if example:
            initial.update(example_initial(example))
        form = SubmissionForm(initial=initial)
    return render(request, "submissions/submit.html", {"form": form, "example": example})


def example_initial(example: examples.Example) -> dict:
    """The submit form filled in with an example: its code, backend and problem, tagged "example",
    on the hardware that runs it (the site's default first)."""
    runs_it = [hw for hw in Hardware.objects.filter(active=True) if example.runs_on(hw)]
    runs_it.sort(key=lambda hw: hw.slug != settings.PKB_DEFAULT_HARDWARE)
    return {
        "problem": example.problem,
        "backend": example.backend,
        "model_tag": "example",
        "code": example.code,
        "hardware": runs_it[:1],
    }


def _submission(pk: int) -> Submission:
    return get_object_or_404(Submission.objects.select_related("problem", "owner"), pk=pk)


def _evaluations(submission: Submission, details: bool) -> list[dict]:
    evaluations = list(submission.evaluations.select_related("hardware").order_by("queued_at", "pk"))
    number_runs(evaluations)
    queues: dict[int, dict] = {}  # per hardware, for its queued evaluations
    for ev in evaluations:
        if ev.state == "queued" and ev.hardware_id not in queues:
            queues[ev.hardware_id] = {"length": backlog(ev.hardware), "workers": serving(ev.hardware)}
    return [
        evaluation_view(ev, submission.problem, queue_position(ev), details, queues.get(ev.hardware_id))
        for ev in evaluations
    ]


def submission(request: HttpRequest, pk: int) -> HttpResponse:
    sub = _submission(pk)
    owner_view = sub.code_visible_to(request.user)
    evaluations = _evaluations(sub, details=owner_view)
    context = {
        "submission": sub,
        "owner_view": owner_view,
        "vouched": is_vouched(sub.model_tag, sub.owner_id),
        "evaluations": evaluations,
        "outputs": submission_outputs(sub.pk),
        "live": any(not e["evaluation"].finished for e in evaluations),
        "now": timezone.now(),
    }
    return render(request, "submissions/submission.html", context)


def status(request: HttpRequest, pk: int) -> HttpResponse:
    """The live part of the submission page, polled every 2 s until every evaluation finished."""
    sub = _submission(pk)
    owner_view = sub.code_visible_to(request.user)
    evaluations = _evaluations(sub, details=owner_view)
    live = any(not e["evaluation"].finished for e in evaluations)
    context = {
        "submission": sub,
        "owner_view": owner_view,
        "evaluations": evaluations,
        "outputs": submission_outputs(sub.pk),
        "live": live,
    }
    response = render(request, "submissions/_live.html", context)
    if not live:
        response.status_code = STOP_POLLING
    return response


@login_required
def mine(request: HttpRequest) -> HttpResponse:
    evaluations = Prefetch("evaluations", Evaluation.objects.select_related("hardware").order_by("pk"))
    submissions = list(
        Submission.objects.filter(owner=request.user).select_related("problem").prefetch_related(evaluations)[:200]
    )
    for sub in submissions:
        number_runs(sub.evaluations.all())
    return render(request, "submissions/mine.html", {"submissions": submissions})
