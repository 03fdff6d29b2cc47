"""The catalog (the home page), each problem's page and its task prompt."""

from __future__ import annotations

from django.conf import settings
from django.db.models import Q
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.template.loader import render_to_string
from django.utils.safestring import mark_safe
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import PythonLexer

from catalog import examples
from catalog.models import Hardware, Problem
from catalog.prompt import build_prompt
from catalog.rooflines import profile_rows
from common import params
from evaluator.results import Status
from leaderboards.cache import cached
from leaderboards.comparisons import compare_models, fast_p_curves
from leaderboards.ranking import best_speedups, current, leaderboard, solved_counts
from pages.hardware_results import hardware_results
from submissions.presenters import STATUS_TEXT
from tasks.spec import LEVELS, PARALLELISM

LEADERBOARD_PREVIEW = 10
NEWEST = 8


def _catalog_table(level: int | None, parallelism: str, query: str) -> str:
    problems = Problem.objects.filter(active=True)
    if level is not None:
        problems = problems.filter(level=level)
    if parallelism:
        problems = problems.filter(parallelism=parallelism)
    if query:
        problems = problems.filter(
            Q(title__icontains=query)
            | Q(slug__icontains=query)
            | Q(description__icontains=query)
            | Q(origin__icontains=query)
        )
    problems = list(problems.only("slug", "pkb_id", "title", "level", "parallelism", "bitwise"))
    hardware = list(Hardware.objects.filter(active=True))
    ids = [p.pk for p in problems]
    best, solved = best_speedups(ids), solved_counts(ids)
    rows = [
        {"problem": p, "best": [(hw, best.get((p.pk, hw.pk))) for hw in hardware], "solved": solved.get(p.pk, 0)}
        for p in problems
    ]
    return render_to_string("catalog/_table.html", {"rows": rows, "hardware": hardware})


def catalog(request: HttpRequest) -> HttpResponse:
    level = params.level(request.GET.get("level"))
    parallelism = params.parallelism(request.GET.get("parallelism"))
    query = request.GET.get("q", "").strip()[:200]
    # The table reads only problems, hardware and results: cached under the results version.
    table = mark_safe(
        cached("catalog-table", (level, parallelism, query), lambda: _catalog_table(level, parallelism, query))
    )
    if request.htmx:
        return HttpResponse(table)
    context = {
        "table": table,
        "problem_count": Problem.objects.filter(active=True).count(),
        "headline": _headline(),
        "newest": newest_results(),
        "first_example": _first_example(request),
        "levels": LEVELS,
        "parallelisms": PARALLELISM,
        "level": "" if level is None else str(level),
        "parallelism": parallelism,
        "q": query,
    }
    return render(request, "catalog/catalog.html", context)


def default_hardware() -> Hardware | None:
    """The site's default hardware (PKB_DEFAULT_HARDWARE) where it is active, else the first active one."""
    active = list(Hardware.objects.filter(active=True))
    return next((hw for hw in active if hw.slug == settings.PKB_DEFAULT_HARDWARE), active[0] if active else None)


def _headline() -> dict | None:
    """The home page's chart: fast_p over p for every model on the default hardware."""
    hw = default_hardware()
    if hw is None:
        return None
    comparison = compare_models(hw)
    return {
        "hardware": hw,
        "comparison": comparison,
        "curves": fast_p_curves(comparison.scores) if comparison.scores else None,
    }


def newest_results(limit: int = NEWEST) -> list[dict]:
    """The latest finished evaluations (current and not hidden), newest first: what they are and their
    status, which is public (why one failed is not)."""

    def compute() -> list[dict]:
        fields = (
            "pk", "submission_id", "model_tag", "status", "speedup", "finished_at", "mode",
            "problem__slug", "problem__title", "hardware__slug",
        )  # fmt: skip
        shown = current().filter(hidden=False)
        # Finished times first (newest first, through the ev_newest index), then any without one.
        rows = list(shown.filter(finished_at__isnull=False).order_by("-finished_at", "-pk").values(*fields)[:limit])
        if len(rows) < limit:
            rows += shown.filter(finished_at__isnull=True).order_by("-pk").values(*fields)[: limit - len(rows)]
        return [
            {
                **r,
                "correct": r["status"] == Status.CORRECT,
                "status_text": STATUS_TEXT.get(r["status"] or "", r["status"] or ""),
            }
            for r in rows
        ]

    return cached("newest-results", (limit,), compute)


def _first_example(request: HttpRequest) -> dict | None:
    """For newcomers (no submission yet): the first example that runs here without a GPU."""
    if request.user.is_authenticated and request.user.submissions.exists():
        return None
    example = examples.first_cpu_example()
    if example is None or not Problem.objects.filter(slug=example.problem, active=True).exists():
        return None
    runs_it = [hw for hw in Hardware.objects.filter(active=True) if example.runs_on(hw)]
    # The hardware without a GPU, where there is some: what a newcomer's own machine has.
    hardware = [hw.slug for hw in runs_it if hw.on_cpu] or [hw.slug for hw in runs_it]
    return {"example": example, "hardware": hardware} if hardware else None


def problem(request: HttpRequest, slug: str) -> HttpResponse:
    prob = get_object_or_404(Problem, slug=slug)
    hardware = list(Hardware.objects.filter(active=True))
    boards = [(hw, leaderboard(prob, hw, limit=LEADERBOARD_PREVIEW)) for hw in hardware]
    context = {
        "problem": prob,
        "hardware": hardware,
        "examples": [
            {"example": e, "hardware": [hw.slug for hw in hardware if e.runs_on(hw)]}
            for e in examples.for_problem(prob.slug)
        ],
        "reference_html": highlight(prob.reference_source, PythonLexer(), HtmlFormatter(cssclass="highlight")),
        "profiles": profile_rows(prob),
        "leaderboards": boards,
        "results": hardware_results(
            prob, hardware, {hw.pk: entries[0].evaluation if entries else None for hw, entries in boards}
        ),
    }
    return render(request, "catalog/problem.html", context)


def prompt(request: HttpRequest, slug: str) -> HttpResponse:
    prob = get_object_or_404(Problem, slug=slug)
    hw = get_object_or_404(Hardware, slug=request.GET.get("hardware", ""))
    response = HttpResponse(build_prompt(prob, hw), content_type="text/plain; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{prob.slug}_{hw.slug}_prompt.md"'
    return response
