"""A problem's full leaderboard on one hardware, and the model and hardware comparisons."""

from __future__ import annotations

import hashlib

from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render

from catalog.models import Hardware, Problem
from common import charts, params
from evaluator.results import FailureKind
from leaderboards import metrics
from leaderboards.comparisons import compare_hardware, compare_models, fast_p_curves, model_tags
from leaderboards.ranking import leaderboard as ranked
from tasks.spec import LEVELS


def _hardware(slug: str | None, default: Hardware | None = None) -> Hardware | None:
    if not slug:
        return default
    return get_object_or_404(Hardware, slug=slug)


def leaderboard(request: HttpRequest, slug: str, hardware: str) -> HttpResponse:
    problem = get_object_or_404(Problem, slug=slug)
    hw = get_object_or_404(Hardware, slug=hardware)
    context = {
        "problem": problem,
        "hw": hw,
        "entries": ranked(problem, hw),
        "all_hardware": Hardware.objects.filter(active=True),
    }
    return render(request, "leaderboards/leaderboard.html", context)


def _model_panel(comparison, index: int) -> dict:
    scores = comparison.scores
    fail_labels = [s.model for s in scores]
    return {
        "comparison": comparison,
        "fast_curves": fast_p_curves(scores),
        # On hardware the GPU roofline does not describe, no result has a utilization: no curve.
        "roof_curves": charts.threshold_curves(
            metrics.U_GRID, {s.model: s.roof_u for s in scores}, "u", "roof_u", "u (fraction of the roofline)"
        )
        if comparison.hardware.has_roofline
        else None,
        "failure_chart": charts.bar(
            fail_labels,
            {kind.value: [s.failures[kind] for s in scores] for kind in FailureKind},
            "model",
            "failed samples",
            stacked=True,
        ),
        "ks": sorted({k for s in scores for k in s.pass_at}),
        "ids": {name: f"{name}-chart-{index}" for name in ("fast", "roof", "fail")},
        "key": _panel_key(comparison, index),
    }


def _panel_key(comparison, index: int) -> str:
    """What a panel's HTML shows, digested: the template caches each panel under it, so a new result
    renders again only the panels whose figures it changed."""
    hw = comparison.hardware
    shown = (
        index, hw.pk, hw.slug, hw.mode, comparison.level, comparison.n_problems, comparison.include_unverified,
        comparison.owners, comparison.scores, comparison.by_level,
    )  # fmt: skip
    return hashlib.sha256(repr(shown).encode()).hexdigest()


def compare_models_view(request: HttpRequest) -> HttpResponse:
    all_hardware = list(Hardware.objects.filter(active=True))
    hw_a = _hardware(request.GET.get("hardware"), all_hardware[0] if all_hardware else None)
    hw_b = _hardware(request.GET.get("hardware_b"))
    level = params.level(request.GET.get("level"))
    chosen = [m[:100] for m in request.GET.getlist("models") if m][:50]
    unverified = request.GET.get("unverified") == "1"
    chosen_hardware = [hw for hw in (hw_a, hw_b) if hw is not None]
    panels = [
        _model_panel(compare_models(hw, chosen or None, level, unverified), i) for i, hw in enumerate(chosen_hardware)
    ]
    context = {
        "panels": panels,
        "all_hardware": all_hardware,
        "hw_a": hw_a,
        "hw_b": hw_b,
        "level": level,
        "levels": LEVELS,
        # Unfiltered, the panels already name every model; a filter needs the full list for the menu.
        "models": model_tags(hw_a, unverified)
        if chosen or level
        else sorted({s.model for p in panels for s in p["comparison"].scores}),
        "chosen": chosen,
        "unverified": unverified,
        "p_grid": metrics.P_GRID,
    }
    return render(request, "leaderboards/models.html", context)


def compare_hardware_view(request: HttpRequest) -> HttpResponse:
    all_hardware = list(Hardware.objects.filter(active=True))
    hw_a = _hardware(request.GET.get("a"), all_hardware[0] if all_hardware else None)
    hw_b = _hardware(request.GET.get("b"), all_hardware[1] if len(all_hardware) > 1 else None)
    problem = get_object_or_404(Problem, slug=request.GET["problem"]) if request.GET.get("problem") else None
    comparison = compare_hardware(hw_a, hw_b, problem) if hw_a and hw_b and hw_a != hw_b else None
    chart = None
    if comparison:
        points = [
            {"x": r.evaluation_a.speedup, "y": r.speedup_b}
            for r in comparison.rows
            if r.evaluation_a.speedup and r.speedup_b
        ]
        chart = charts.scatter(points, f"speedup on {hw_a.slug}", f"speedup on {hw_b.slug}", "submissions")
    context = {
        "comparison": comparison,
        "chart": chart,
        "all_hardware": all_hardware,
        "hw_a": hw_a,
        "hw_b": hw_b,
        "problem": problem,
        "problems": Problem.objects.filter(active=True).only("slug", "title"),
    }
    return render(request, "leaderboards/hardware.html", context)
