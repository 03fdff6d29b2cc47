from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone

from leaderboards.comparisons import submission_outputs
from leaderboards.ranking import is_vouched
from submissions.forms import SubmissionForm
from submissions.models import Hardware, Submission
from submissions.presenters import evaluation_view
from submissions.queueing import queue_position
from submissions.services import NewSubmission, RateLimited, create_submission

STOP_POLLING = 286  # htmx stops an `every 2s` trigger on this status


@login_required
def submit(request: HttpRequest) -> HttpResponse:
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
        initial = {"problem": request.GET.get("problem"), "hardware": Hardware.objects.filter(active=True)[:1]}
        form = SubmissionForm(initial=initial)
    return render(request, "submissions/submit.html", {"form": form})


def _submission(pk: int) -> Submission:
    return get_object_or_404(Submission.objects.select_related("problem", "owner"), pk=pk)


def _evaluations(submission: Submission, details: bool) -> list[dict]:
    evaluations = submission.evaluations.select_related("hardware").order_by("queued_at", "pk")
    return [evaluation_view(ev, submission.problem, queue_position(ev), details) for ev in evaluations]


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
    submissions = (
        Submission.objects.filter(owner=request.user)
        .select_related("problem")
        .prefetch_related("evaluations__hardware")[:200]
    )
    return render(request, "submissions/mine.html", {"submissions": submissions})
