"""The JSON API (OpenAPI schema at /api/openapi.json, browsable at /api/docs)."""

from __future__ import annotations

from typing import Annotated

from django.conf import settings
from django.core.exceptions import RequestDataTooBig, SuspiciousOperation
from django.db.models import Prefetch
from django.http import HttpResponse
from django.shortcuts import get_object_or_404
from ninja import NinjaAPI, Query, Status
from pydantic import StringConstraints

from accounts import throttle
from api.auth import TokenAuth, viewer
from api.schemas import (
    SLUG,
    Error,
    EvaluationOut,
    HardwareComparisonOut,
    HardwareOut,
    LeaderboardEntryOut,
    ModelComparisonOut,
    ModelNameIn,
    ModelNameOut,
    ProblemDetail,
    ProblemOut,
    SubmissionIn,
    SubmissionOut,
)
from catalog.models import Hardware, Problem
from catalog.prompt import build_prompt
from common.middleware import too_big
from dispatch.positions import backlog, queue_position
from dispatch.presence import serving
from leaderboards import metrics
from leaderboards.comparisons import OutputAgreement, compare_hardware, compare_models, submission_outputs
from leaderboards.ranking import leaderboard
from submissions.models import Evaluation, ModelName, Submission
from submissions.presenters import number_runs, public_result
from submissions.services import NameTaken, NewSubmission, RateLimited, create_submission, register_model_name
from submissions.validation import InvalidCode

api = NinjaAPI(
    title="ParallelKernelBench Platform API",
    version="1",
    urls_namespace="api",
    description="Submit kernels, poll their evaluations, read leaderboards and comparisons. "
    "Writes need `Authorization: Bearer <token>` (tokens: the account page).",
)

Slug = Annotated[str, StringConstraints(pattern=SLUG)]
MAX_ID = 2**63 - 1


@api.exception_handler(RequestDataTooBig)
def request_too_big(request, exc):
    return api.create_response(request, {"detail": too_big(settings.DATA_UPLOAD_MAX_MEMORY_SIZE)}, status=413)


@api.exception_handler(throttle.Throttled)
def throttled(request, exc):
    response = api.create_response(request, {"detail": str(exc)}, status=429)
    response["Retry-After"] = str(exc.retry_after_s)
    return response


@api.exception_handler(SuspiciousOperation)
def request_unreadable(request, exc):
    return api.create_response(request, {"detail": f"the request could not be read: {exc}"}, status=400)


def _hardware(slug: str) -> Hardware:
    return get_object_or_404(Hardware, slug=slug)


def _evaluation_summary(ev: Evaluation, details: bool) -> dict:
    """`details`: the viewer may read why a failed evaluation failed (the code's owner, admins)."""
    fields = (
        "id",
        "world_size",
        "mode",
        "state",
        "stage",
        "status",
        "correct",
        "speedup",
        "utilization",
        "solution_us",
        "reference_us",
        "output_digest",
        "reason",
        "hidden",
        "queued_at",
        "started_at",
        "finished_at",
    )
    data = {f: getattr(ev, f) for f in fields}
    data.update(
        hardware=ev.hardware.slug,
        queue_position=queue_position(ev),
        workers=[w.name for w in serving(ev.hardware)] if ev.state == "queued" else None,
        run=getattr(ev, "run", None) or _run_number(ev),
    )
    if not details:
        data["reason"] = ""
    return data


def _run_number(ev: Evaluation) -> int:
    return Evaluation.objects.filter(submission_id=ev.submission_id, hardware_id=ev.hardware_id, pk__lte=ev.pk).count()


def _submission_out(sub: Submission, user) -> dict:
    evaluations = list(sub.evaluations.all())
    number_runs(evaluations)
    private = sub.code_visible_to(user)
    return {
        "id": sub.pk,
        "problem": sub.problem.slug,
        "owner": sub.owner.username,
        "model_tag": sub.model_tag,
        "sample_index": sub.sample_index,
        "run_label": sub.run_label,
        "backend": sub.backend,
        "sha256": sub.sha256 if private else None,
        "created_at": sub.created_at,
        "code": sub.code if private else None,
        "finished": all(ev.finished for ev in evaluations),
        "evaluations": [_evaluation_summary(ev, private) for ev in evaluations],
        "outputs": _agreement_out(submission_outputs(sub.pk)),
        "url": sub.get_absolute_url(),
    }


def _agreement_out(agreement: OutputAgreement | None) -> dict | None:
    if agreement is None:
        return None
    return {"hardware": agreement.hardware, "identical": agreement.identical, "groups": agreement.groups}


def _submission(pk: int) -> Submission:
    evaluations = Prefetch("evaluations", Evaluation.objects.select_related("hardware").order_by("pk"))
    return get_object_or_404(Submission.objects.select_related("problem", "owner").prefetch_related(evaluations), pk=pk)


@api.get("/problems", response=list[ProblemOut], tags=["catalog"])
def list_problems(request):
    return Problem.objects.filter(active=True)


@api.get("/problems/{slug}", response={200: ProblemDetail, 404: Error}, tags=["catalog"])
def get_problem(request, slug: Slug):
    return get_object_or_404(Problem, slug=slug)


@api.get("/problems/{slug}/prompt", response={200: str, 404: Error}, tags=["catalog"])
def get_prompt(request, slug: Slug, hardware: Slug):
    """The task prompt as Markdown text, for an LLM harness."""
    return HttpResponse(
        build_prompt(get_object_or_404(Problem, slug=slug), _hardware(hardware)),
        content_type="text/markdown; charset=utf-8",
    )


@api.get("/hardware", response=list[HardwareOut], tags=["catalog"])
def list_hardware(request):
    rows = []
    for hw in Hardware.objects.filter(active=True):
        gpu = hw.roofline_profile()
        rows.append(
            {
                **{f: getattr(hw, f) for f in ("slug", "name", "profile", "gpu_count", "mode")},
                **{f: getattr(gpu, f) for f in ("nvls", "bf16_tc", "fp32", "hbm_tbps", "nvlink_gbps")},
                "queued": backlog(hw),
                "workers": [w.name for w in serving(hw)],
            }
        )
    return rows


@api.post(
    "/submissions",
    auth=TokenAuth(),
    tags=["submissions"],
    response={201: SubmissionOut, 400: Error, 401: Error, 413: Error, 429: Error},
)
def submit(request, payload: SubmissionIn):
    problem = Problem.objects.filter(slug=payload.problem, active=True).first()
    if problem is None:
        return Status(400, {"detail": f"unknown problem {payload.problem!r}"})
    slugs = list(dict.fromkeys(payload.hardware or [settings.PKB_DEFAULT_HARDWARE]))
    found = {hw.slug: hw for hw in Hardware.objects.filter(slug__in=slugs, active=True)}
    missing = [s for s in slugs if s not in found]
    if missing:
        return Status(400, {"detail": f"unknown or inactive hardware: {', '.join(missing)}"})
    new = NewSubmission(
        problem=problem,
        model_tag=payload.model_tag,
        backend=payload.backend,
        code=payload.code,
        hardware=[found[s] for s in slugs],
        sample_index=payload.sample_index,
        run_label=payload.run_label,
    )
    try:
        sub = create_submission(request.user, new)
    except InvalidCode as e:
        return Status(400, {"detail": str(e)})
    except RateLimited as e:
        response = api.create_response(request, {"detail": str(e)}, status=429)
        response["Retry-After"] = str(e.retry_after_s)
        return response
    return Status(201, _submission_out(_submission(sub.pk), request.user))


@api.get("/submissions/{submission_id}", response={200: SubmissionOut, 404: Error, 429: Error}, tags=["submissions"])
def get_submission(request, submission_id: int):
    user = viewer(request)  # a token is checked (and counted) whatever it asks for
    if not 0 < submission_id <= MAX_ID:
        return Status(404, {"detail": "no such submission"})
    return _submission_out(_submission(submission_id), user)


@api.get("/evaluations/{evaluation_id}", response={200: EvaluationOut, 404: Error, 429: Error}, tags=["submissions"])
def get_evaluation(request, evaluation_id: int):
    """One evaluation with its result document. Where a failed evaluation went wrong (reason,
    failing_rank, failure, log_tail, per-shape correctness) and the host's name are for the code's
    owner and admins only; others get its status."""
    user = viewer(request)  # a token is checked (and counted) whatever it asks for
    if not 0 < evaluation_id <= MAX_ID:
        return Status(404, {"detail": "no such evaluation"})
    ev = get_object_or_404(Evaluation.objects.select_related("hardware", "submission__problem"), pk=evaluation_id)
    details = ev.submission.code_visible_to(user)
    return {
        **_evaluation_summary(ev, details),
        "submission_id": ev.submission_id,
        "problem": ev.submission.problem.slug,
        "model_tag": ev.submission.model_tag,
        "result": ev.result if details else public_result(ev.result),
    }


@api.get("/leaderboards/{problem}/{hardware}", response={200: list[LeaderboardEntryOut], 404: Error}, tags=["results"])
def get_leaderboard(request, problem: Slug, hardware: Slug, limit: int = Query(100, ge=1, le=1000)):
    prob = get_object_or_404(Problem, slug=problem)
    return [
        {
            "rank": e.rank,
            "tied": e.tied,
            "evaluation_id": e.evaluation.pk,
            "submission_id": e.submission.pk,
            "owner": e.submission.owner.username,
            "model_tag": e.submission.model_tag,
            "vouched": e.evaluation.vouched,
            "backend": e.submission.backend,
            "speedup": e.evaluation.speedup,
            "speedup_interval": list(e.speedup_interval) if e.speedup_interval else None,
            "utilization": e.evaluation.utilization,
            "solution_us": e.evaluation.solution_us,
            "reference_us": e.evaluation.reference_us,
            "submitted_at": e.submission.created_at,
        }
        for e in leaderboard(prob, _hardware(hardware), limit=limit)
    ]


@api.get("/models", response=list[ModelNameOut], tags=["results"])
def list_model_names(request):
    """Registered model names, their owners and the accounts they vouch for. A tag not listed is unverified."""
    return [
        {
            "name": m.name,
            "owner": m.owner.username,
            "vouched_accounts": sorted(u.username for u in m.vouched_accounts.all()),
            "registered_at": m.registered_at,
        }
        for m in ModelName.objects.select_related("owner").prefetch_related("vouched_accounts")
    ]


@api.post(
    "/models",
    auth=TokenAuth(),
    response={201: ModelNameOut, 400: Error, 401: Error, 409: Error, 429: Error},
    tags=["results"],
)
def register_model(request, payload: ModelNameIn):
    """Register a model name to this account: comparisons then count the runs under it that this
    account vouches for (its own; more on the account page). First come, first served."""
    try:
        model = register_model_name(request.user, payload.name)
    except NameTaken as e:
        return Status(409, {"detail": str(e)})
    except ValueError as e:
        return Status(400, {"detail": str(e)})
    return Status(
        201,
        {
            "name": model.name,
            "owner": request.user.username,
            "vouched_accounts": [],
            "registered_at": model.registered_at,
        },
    )


@api.get("/compare/models", response={200: ModelComparisonOut, 404: Error}, tags=["results"])
def get_model_comparison(
    request,
    hardware: Slug,
    models: list[Annotated[str, StringConstraints(max_length=100)]] = Query(None),
    level: int | None = Query(None, ge=1, le=6),
    include_unverified: bool = False,
):
    """fast_p over p in 0..3, roof_u over u in 0..1, pass@k and fast_1@k, and failure counts per model.
    Only runs a model name's owner vouches for count (`owner`: who registered it), unless
    `include_unverified`; then every run counts, and a model without an owner has `owner` null."""
    models = [m.replace("\x00", "") for m in models or []][:50] or None
    cmp = compare_models(_hardware(hardware), models, level, include_unverified)
    return {
        "hardware": cmp.hardware.slug,
        "level": cmp.level,
        "include_unverified": cmp.include_unverified,
        "n_problems": cmp.n_problems,
        "p_grid": list(metrics.P_GRID),
        "u_grid": list(metrics.U_GRID),
        "models": [
            {
                "model": s.model,
                "owner": cmp.owners.get(s.model),
                "attempted": s.attempted,
                "n_problems": s.n_problems,
                "samples": s.samples,
                "fast_p": s.fast_p,
                "roof_u": s.roof_u,
                "pass_at_k": s.pass_at,
                "fast_1_at_k": s.fast1_at,
                "fast_0_interval": list(s.fast_0_interval) if s.fast_0_interval else None,
                "fast_1_interval": list(s.fast_1_interval) if s.fast_1_interval else None,
                "failures": s.failures,
            }
            for s in cmp.scores
        ],
    }


@api.get("/compare/hardware", response={200: HardwareComparisonOut, 400: Error, 404: Error}, tags=["results"])
def get_hardware_comparison(
    request, a: Slug, b: Slug, problem: Slug | None = None, limit: int = Query(500, ge=1, le=5000)
):
    """The same submissions' results on two hardware, and whether their outputs are bitwise identical."""
    if a == b:
        return Status(400, {"detail": "choose two different hardware"})
    prob = get_object_or_404(Problem, slug=problem) if problem else None
    cmp = compare_hardware(_hardware(a), _hardware(b), prob, limit=limit)
    return {
        "a": a,
        "b": b,
        "total": cmp.total,
        "shown": len(cmp.rows),
        "both_correct": cmp.both_correct,
        "bitwise_identical": cmp.identical,
        "digests_compared": cmp.digests_compared,
        "geomean_ratio_b_over_a": cmp.geomean_ratio,
        "geomean_ratio_interval": list(cmp.geomean_ratio_interval) if cmp.geomean_ratio_interval else None,
        "pairs": [
            {
                "submission_id": r.evaluation_a.submission_id,
                "problem": r.evaluation_a.problem.slug,
                "model_tag": r.evaluation_a.model_tag,
                "status_a": r.evaluation_a.status,
                "status_b": r.status_b,
                "speedup_a": r.evaluation_a.speedup,
                "speedup_b": r.speedup_b,
                "bitwise_identical": r.bitwise_identical,
                "identical_on_every_hardware": r.every_hardware.identical if r.every_hardware else None,
                "hardware_with_digests": r.every_hardware.hardware if r.every_hardware else 0,
            }
            for r in cmp.rows
        ],
    }
