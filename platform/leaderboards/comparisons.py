"""Model and hardware comparisons, computed in the database from the ranking's current results and
turned into metrics by `leaderboards.metrics`."""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from dataclasses import dataclass, field

from django.db import connection
from django.db.models import Count, Q

from catalog.models import Hardware, Problem
from common import charts
from evaluator.results import FailureKind, Status
from leaderboards import metrics
from leaderboards.cache import cached
from leaderboards.ranking import current, vouched
from submissions.models import Evaluation, ModelName

CORRECT = Q(status=Status.CORRECT.value, hidden=False)
# An admin-rejected result counts as a rejection, whatever the evaluator said.
STATUS_FILTERS = {kind.value: Q(status=kind.value, hidden=False) for kind in FailureKind}
STATUS_FILTERS[FailureKind.REJECTED.value] = Q(status=FailureKind.REJECTED.value) | Q(hidden=True)


def _fast_key(i: int) -> str:
    return f"fast_{i}"


def _roof_key(i: int) -> str:
    return f"roof_{i}"


def per_problem_counts(
    hardware: Hardware, models=None, problem_ids=None, include_unverified: bool = False
) -> list[dict]:
    """One row per (model tag, problem): n samples and, for each threshold, how many met it. Only the
    runs each model name's owner vouches for, unless `include_unverified`. One query."""
    aggregates = {"n": Count("id"), "correct_n": Count("id", filter=CORRECT)}
    for i, p in enumerate(metrics.P_GRID):
        aggregates[_fast_key(i)] = Count("id", filter=CORRECT & Q(speedup__gt=p) if p > 0 else CORRECT)
    for i, u in enumerate(metrics.U_GRID):
        aggregates[_roof_key(i)] = Count("id", filter=CORRECT & Q(utilization__gte=u) if u > 0 else CORRECT)
    for kind, condition in STATUS_FILTERS.items():
        aggregates[kind] = Count("id", filter=condition)
    qs = current(hardware) if include_unverified else current(hardware).filter(vouched())
    if models:
        qs = qs.filter(model_tag__in=list(models))
    if problem_ids is not None:
        qs = qs.filter(problem_id__in=list(problem_ids))
    return list(qs.values("model_tag", "problem_id").annotate(**aggregates).order_by())


@dataclass
class ModelScores:
    model: str
    attempted: int
    n_problems: int
    samples: int
    fast_p: list[float | None]  # over metrics.P_GRID
    roof_u: list[float | None]  # over metrics.U_GRID
    pass_at: dict[int, float | None]
    fast1_at: dict[int, float | None]
    failures: dict[str, int]
    # 95% bootstrap intervals over problems (metrics.bootstrap_interval) of fast_0 and fast_1
    fast_0_interval: tuple[float, float] | None = None
    fast_1_interval: tuple[float, float] | None = None

    @property
    def fast_0(self) -> float | None:
        return self.fast_p[0]

    @property
    def fast_1(self) -> float | None:
        return self.fast_p[metrics.P_GRID.index(1.0)]


def _scores(model: str, rows: list[dict], n_problems: int) -> ModelScores:
    def pairs(key: str) -> list[tuple[int, int]]:
        return [(r["n"], r[key]) for r in rows]

    one = metrics.P_GRID.index(1.0)
    ks = metrics.ks_for(pairs("correct_n"))
    return ModelScores(
        model=model,
        attempted=len(rows),
        n_problems=n_problems,
        samples=sum(r["n"] for r in rows),
        fast_p=[metrics.estimate(pairs(_fast_key(i)), n_problems) for i in range(len(metrics.P_GRID))],
        roof_u=[metrics.estimate(pairs(_roof_key(i)), n_problems) for i in range(len(metrics.U_GRID))],
        pass_at={k: metrics.estimate(pairs("correct_n"), n_problems, k) for k in ks},
        fast1_at={k: metrics.estimate(pairs(_fast_key(one)), n_problems, k) for k in ks},
        failures={kind: sum(r[kind] for r in rows) for kind in STATUS_FILTERS},
        fast_0_interval=metrics.bootstrap_interval(pairs(_fast_key(0)), n_problems),
        fast_1_interval=metrics.bootstrap_interval(pairs(_fast_key(one)), n_problems),
    )


@dataclass
class ModelComparison:
    hardware: Hardware
    level: int | None
    n_problems: int
    scores: list[ModelScores] = field(default_factory=list)
    include_unverified: bool = False
    owners: dict[str, str] = field(default_factory=dict)  # model name -> the account that registered it
    # level -> model -> (fast_0, fast_1), every level, whatever `level` selects
    by_level: dict[int, dict[str, tuple[float | None, float | None]]] = field(default_factory=dict)


def compare_models(
    hardware: Hardware, models=None, level: int | None = None, include_unverified: bool = False
) -> ModelComparison:
    """Every model's scores on one hardware (optionally one level), cached under the results version.
    Only runs the model names' owners vouch for, unless `include_unverified`."""
    models = tuple(sorted(set(models))) if models else None
    return cached(
        "model-comparison",
        (hardware.pk, models, level, include_unverified),
        lambda: _compare_models(hardware, models, level, include_unverified),
    )


def _compare_models(hardware: Hardware, models, level: int | None, include_unverified: bool) -> ModelComparison:
    levels = dict(Problem.objects.filter(active=True).values_list("id", "level"))
    per_level = Counter(levels.values())
    grouped: dict[str, list[dict]] = defaultdict(list)
    for row in per_problem_counts(hardware, models, list(levels), include_unverified):
        row["level"] = levels[row["problem_id"]]
        grouped[row["model_tag"]].append(row)
    n_problems = per_level[level] if level is not None else len(levels)
    result = ModelComparison(
        hardware=hardware, level=level, n_problems=n_problems, include_unverified=include_unverified
    )
    result.owners = dict(ModelName.objects.filter(name__in=list(grouped)).values_list("name", "owner__username"))
    in_scope = {m: [r for r in rows if level is None or r["level"] == level] for m, rows in grouped.items()}
    result.scores = sorted(
        (_scores(model, rows, n_problems) for model, rows in in_scope.items() if rows),
        key=lambda s: (-(s.fast_1 or 0), -(s.fast_0 or 0), s.model),
    )
    one = _fast_key(metrics.P_GRID.index(1.0))
    for lvl in sorted(per_level):
        result.by_level[lvl] = {
            model: (
                metrics.estimate([(r["n"], r["correct_n"]) for r in rows if r["level"] == lvl], per_level[lvl]),
                metrics.estimate([(r["n"], r[one]) for r in rows if r["level"] == lvl], per_level[lvl]),
            )
            for model, rows in grouped.items()
        }
    return result


def fast_p_curves(scores: list[ModelScores]) -> dict:
    """fast_p over p for each model, drawn where some curve changes (pkb_site.charts.threshold_curves)."""
    return charts.threshold_curves(
        metrics.P_GRID, {s.model: s.fast_p for s in scores}, "p", "fast_p", "p (speedup threshold)"
    )


def model_tags(hardware: Hardware | None = None, include_unverified: bool = False) -> list[str]:
    qs = current(hardware) if include_unverified else current(hardware).filter(vouched())
    return sorted(qs.values_list("model_tag", flat=True).distinct().order_by())


@dataclass(frozen=True)
class OutputAgreement:
    """One submission's public-trial output digests on every hardware it ran on (current, visible
    results): the hardware slugs grouped by digest, the largest group first."""

    groups: tuple[tuple[str, ...], ...]

    @property
    def hardware(self) -> int:
        return sum(len(g) for g in self.groups)

    @property
    def identical(self) -> bool | None:
        """Whether every hardware gave the same bits; None below two hardware."""
        return None if self.hardware < 2 else len(self.groups) == 1

    @property
    def label(self) -> str:
        """The groups as text: hardware with the same bits joined by ", ", groups by " | "."""
        return " | ".join(", ".join(g) for g in self.groups)


def output_agreement(submission_ids) -> dict[int, OutputAgreement]:
    """Per submission id (those with at least one digest): its outputs across hardware, in one query."""
    by_digest: dict[int, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    rows = (
        current()
        .filter(submission_id__in=list(submission_ids), hidden=False)
        .exclude(output_digest__isnull=True)
        .exclude(output_digest="")
        .values_list("submission_id", "hardware__slug", "output_digest")
    )
    for submission_id, slug, digest in rows:
        by_digest[submission_id][digest].append(slug)
    return {
        sid: OutputAgreement(tuple(sorted((tuple(sorted(g)) for g in groups.values()), key=lambda g: (-len(g), g))))
        for sid, groups in by_digest.items()
    }


def submission_outputs(submission_id: int) -> OutputAgreement | None:
    """One submission's outputs across hardware (None before any digest)."""
    return output_agreement([submission_id]).get(submission_id)


@dataclass(frozen=True)
class PairedResult:
    evaluation_a: Evaluation
    evaluation_b: Evaluation
    every_hardware: OutputAgreement | None = None  # the submission on all hardware, not just these two

    @property
    def speedup_b(self) -> float | None:
        return self.evaluation_b.speedup

    @property
    def status_b(self) -> str | None:
        return self.evaluation_b.status

    @property
    def bitwise_identical(self) -> bool | None:
        a, b = self.evaluation_a.output_digest, self.evaluation_b.output_digest
        return None if not a or not b else a == b


@dataclass
class HardwareComparison:
    a: Hardware
    b: Hardware
    rows: list[PairedResult]
    total: int  # the figures below cover every pair, not only the rows shown
    both_correct: int
    identical: int
    digests_compared: int
    geomean_ratio: float | None
    # 95% interval of the geometric mean: a normal interval for the mean log ratio over the pairs
    # (each pair one submission); None with fewer than two pairs.
    geomean_ratio_interval: tuple[float, float] | None = None


PAIRS_SQL = """
SELECT count(*),
       count(*) FILTER (WHERE a.status = %(correct)s AND b.status = %(correct)s),
       count(*) FILTER (WHERE a.output_digest = b.output_digest),
       count(*) FILTER (WHERE a.output_digest IS NOT NULL AND b.output_digest IS NOT NULL),
       exp(avg(ln(b.speedup / a.speedup)) FILTER (WHERE a.speedup > 0 AND b.speedup > 0)),
       count(*) FILTER (WHERE a.speedup > 0 AND b.speedup > 0),
       avg(ln(b.speedup / a.speedup) * ln(b.speedup / a.speedup)) FILTER (WHERE a.speedup > 0 AND b.speedup > 0)
  FROM submissions_evaluation a
  JOIN submissions_evaluation b ON b.submission_id = a.submission_id
 WHERE a.hardware_id = %(a)s AND b.hardware_id = %(b)s
   AND a.state = 'done' AND b.state = 'done' AND NOT a.superseded AND NOT b.superseded
   AND NOT a.hidden AND NOT b.hidden
"""


def ratio_interval(geomean: float | None, n: int, mean_square: float | None) -> tuple[float, float] | None:
    """95% interval of a geometric mean of n ratios, from the mean and mean square of their logs."""
    if geomean is None or mean_square is None or n < 2:
        return None
    mean = math.log(geomean)
    variance = max(0.0, mean_square - mean * mean) * n / (n - 1)
    half = 1.96 * math.sqrt(variance / n)
    return (math.exp(mean - half), math.exp(mean + half))


def pair_summary(a: Hardware, b: Hardware, problem: Problem | None) -> tuple:
    """(pairs, both correct, identical digests, digests compared, geometric mean of b/a speedups,
    ratios in that mean, mean square of their logs)."""

    def compute() -> tuple:
        sql, params = PAIRS_SQL, {"a": a.pk, "b": b.pk, "correct": Status.CORRECT.value}
        if problem is not None:
            sql, params = sql + " AND a.problem_id = %(problem)s", {**params, "problem": problem.pk}
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            return tuple(cursor.fetchone())

    return cached("hardware-pairs/2", (a.pk, b.pk, problem.pk if problem else None), compute)


def compare_hardware(a: Hardware, b: Hardware, problem: Problem | None = None, limit: int = 200) -> HardwareComparison:
    """The same submissions' current results on two hardware, side by side (visible results only)."""
    on_b = current(b).filter(hidden=False)
    on_a = current(a).filter(hidden=False, submission_id__in=on_b.values("submission_id"))
    if problem is not None:
        on_a = on_a.filter(problem=problem)
    # Pick the rows on the evaluation table alone, then load just those with their relations.
    ids = list(
        on_a.order_by("problem__level", "problem__pkb_id", "-speedup", "pk").values_list("pk", flat=True)[:limit]
    )
    loaded = (
        Evaluation.objects.filter(pk__in=ids)
        .select_related("submission__owner", "problem")
        .defer("result", "submission__code", "problem__reference_source", "problem__description")
        .in_bulk()
    )
    shown = [loaded[pk] for pk in ids]
    partners = {
        ev.submission_id: ev
        for ev in on_b.filter(submission_id__in=[ev.submission_id for ev in shown]).only(
            "submission_id", "speedup", "status", "output_digest"
        )
    }
    agreement = output_agreement(partners)
    total, both_correct, identical, compared, ratio, n_ratios, mean_square = pair_summary(a, b, problem)
    return HardwareComparison(
        a=a,
        b=b,
        rows=[PairedResult(ev, partners[ev.submission_id], agreement.get(ev.submission_id)) for ev in shown],
        total=total,
        both_correct=both_correct,
        identical=identical,
        digests_compared=compared,
        geomean_ratio=ratio,
        geomean_ratio_interval=ratio_interval(ratio, n_ratios or 0, mean_square),
    )
