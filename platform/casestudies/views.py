from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render

from casestudies.models import CaseStudy
from casestudies.render import render_markdown
from common import charts


def _visible(request: HttpRequest):
    studies = CaseStudy.objects.select_related("author")
    return studies if request.user.is_staff else studies.filter(published=True)


def case_studies(request: HttpRequest) -> HttpResponse:
    return render(request, "casestudies/list.html", {"studies": _visible(request)})


def evaluations_chart(evaluations) -> dict | None:
    """Speedup per shape of each linked evaluation, one series each, over the union of shape names."""
    shapes: list[str] = []
    series: dict[str, dict[str, float]] = {}
    for ev in evaluations:
        per_shape = {s["name"]: s.get("speedup") for s in (ev.result or {}).get("shapes") or []}
        for name in per_shape:
            if name not in shapes:
                shapes.append(name)
        label = f"#{ev.submission_id} {ev.submission.problem.slug} {ev.submission.model_tag} on {ev.hardware.slug}"
        series[label] = per_shape
    if not any(v for per_shape in series.values() for v in per_shape.values()):
        return None
    return charts.bar(
        shapes,
        {label: [per_shape.get(s) for s in shapes] for label, per_shape in series.items()},
        "shape",
        "speedup over the reference (x)",
    )


def case_study(request: HttpRequest, slug: str) -> HttpResponse:
    study = get_object_or_404(_visible(request), slug=slug)
    evaluations = list(
        study.evaluations.filter(hidden=False).select_related("submission__problem", "hardware").order_by("pk")
    )
    context = {
        "study": study,
        "body": render_markdown(study.body),
        "evaluations": evaluations,
        "chart": evaluations_chart(evaluations),
    }
    return render(request, "casestudies/detail.html", context)
