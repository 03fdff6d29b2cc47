"""Model and hardware comparisons, computed in the database from the ranking's current results and
turned into metrics by `leaderboards.metrics`.

Right after a new result, pages read what the database keeps up to date as results change
(migration 0007): model comparisons sum ResultCount rows, and hardware comparisons combine
per-problem parts cached under ProblemResultsVersion, so only the new result's problem is read
again. The tests hold both to the straightforward computations (`direct_per_problem_counts`, and
every pair read at once)."""

from __future__ import annotations

import hashlib
import math
from collections import Counter, defaultdict
from dataclasses import dataclass, field

from django.conf import settings
from django.core.cache import cache
from django.core.exceptions import EmptyResultSet
from django.db import connection, transaction
from django.db.models import Count, F, Q

from catalog.models import Hardware, Problem
from common import charts
from evaluator.results import FailureKind, Status
from leaderboards import metrics
from leaderboards.cache import cached
from leaderboards.ranking import current, vouched
from submissions.models import Evaluation, ModelName, ProblemResultsVersion, ResultCount, ResultsVersion

CORRECT = Q(status=Status.CORRECT.value, hidden=False)
# An admin-rejected result counts as a rejection, whatever the evaluator said.
STATUS_FILTERS = {kind.value: Q(status=kind.value, hidden=False) for kind in FailureKind}
STATUS_FILTERS[FailureKind.REJECTED.value] = Q(status=FailureKind.REJECTED.value) | Q(hidden=True)


def _fast_key(i: int) -> str:
    return f"fast_{i}"


def _roof_key(i: int) -> str:
    return f"roof_{i}"


# What a model comparison counts per model and problem: the ResultCount columns and, for each, which
# current results count in it (None: all of them).
COUNTS: dict[str, Q | None] = {
    "n": None,
    "correct_n": CORRECT,
    **{_fast_key(i): CORRECT & Q(speedup__gt=p) if p > 0 else CORRECT for i, p in enumerate(metrics.P_GRID)},
    **{_roof_key(i): CORRECT & Q(utilization__gte=u) if u > 0 else CORRECT for i, u in enumerate(metrics.U_GRID)},
    **STATUS_FILTERS,
}


def _counted(qs, models, problem_ids):
    if models:
        qs = qs.filter(model_tag__in=list(models))
    if problem_ids is not None:
        qs = qs.filter(problem_id__in=list(problem_ids))
    return qs


def direct_per_problem_counts(
    hardware: Hardware, models=None, problem_ids=None, include_unverified: bool = False
) -> list[dict]:
    """`per_problem_counts` counted from the evaluations themselves (what ResultCount must sum to)."""
    aggregates = {name: Count("id", filter=cond) if cond else Count("id") for name, cond in COUNTS.items()}
    qs = current(hardware) if include_unverified else current(hardware).filter(vouched())
    qs = _counted(qs, models, problem_ids)
    return list(qs.values("model_tag", "problem_id").annotate(**aggregates).order_by("model_tag", "problem_id"))


def per_problem_counts(
    hardware: Hardware, models=None, problem_ids=None, include_unverified: bool = False
) -> list[dict]:
    """One row per (model tag, problem), in that order: n samples and, for each threshold, how many
    met it. Only the runs each model name's owner vouches for, unless `include_unverified`. One
    query, over ResultCount's few rows per model and problem."""
    names = ("model_tag", "problem_id", *COUNTS)
    return [
        dict(zip(names, row, strict=True)) for row in _count_rows(hardware, models, problem_ids, include_unverified)
    ]


# The sums per model and problem over the ResultCount rows a query selects (written out: as 61 ORM
# annotations the query took longer to build than to run).
_SUMS = ", ".join(f"SUM({c})" for c in COUNTS)
_SUMS_SQL = (
    f"SELECT model_tag, problem_id, {_SUMS} FROM ({{rows}}) counted "
    "GROUP BY model_tag, problem_id HAVING SUM(n) > 0 ORDER BY model_tag, problem_id"
)
# PostgreSQL: each model's `_fingerprint`, computed where the rows are, so that only the rows of
# models whose figures are not cached yet travel.
_FINGERPRINTS_SQL = (
    "SELECT model_tag, encode(sha256(convert_to(string_agg(problem_id || ':' || sums, ';' ORDER BY problem_id), "
    f"'UTF8')), 'hex') FROM (SELECT model_tag, problem_id, concat_ws(',', {_SUMS}) AS sums FROM ({{rows}}) counted "
    "GROUP BY model_tag, problem_id HAVING SUM(n) > 0) per_problem GROUP BY model_tag"
)


def _count_query(hardware: Hardware, models, problem_ids, include_unverified: bool) -> tuple[str, tuple] | None:
    """SQL and parameters selecting the ResultCount rows in scope (model tag, problem id, COUNTS);
    None when nothing is in scope."""
    qs = ResultCount.objects.filter(hardware=hardware)
    if not include_unverified:
        qs = qs.filter(vouched(submitter="submitter_id"))
    qs = _counted(qs, models, problem_ids).values_list("model_tag", "problem_id", *COUNTS).order_by()
    try:
        return qs.query.sql_with_params()
    except EmptyResultSet:
        return None


def _fetch(sql: str, params) -> list[tuple]:
    with connection.cursor() as cursor:  # no ORM conversion of 60,000 integers
        cursor.execute(sql, params)
        return cursor.fetchall()


def _count_rows(hardware: Hardware, models, problem_ids, include_unverified: bool) -> list[tuple]:
    """per_problem_counts' rows as tuples: model tag, problem id, then COUNTS in order."""
    query = _count_query(hardware, models, problem_ids, include_unverified)
    return [] if query is None else _fetch(_SUMS_SQL.format(rows=query[0]), query[1])


def _by_model(rows: list[tuple]) -> dict[str, tuple[tuple, ...]]:
    """_count_rows' rows grouped: model tag -> its rows (problem id, then COUNTS), in problem order."""
    grouped: dict[str, list[tuple]] = defaultdict(list)
    for model, *row in rows:
        grouped[model].append(tuple(row))
    return {model: tuple(rows) for model, rows in grouped.items()}


def _fingerprint(rows: tuple[tuple, ...]) -> str:
    """A digest of one model's per-problem counts (problem id, then COUNTS, in problem order): the
    text _FINGERPRINTS_SQL digests."""
    text = ";".join(f"{row[0]}:{','.join(map(str, row[1:]))}" for row in rows)
    return hashlib.sha256(text.encode()).hexdigest()


def recount_results() -> None:
    """Rebuild ResultCount from the evaluations and raise every ProblemResultsVersion. The database's
    triggers keep both as results change; this is for after rows were loaded with them off."""
    aggregates = {name: Count("id", filter=cond) if cond else Count("id") for name, cond in COUNTS.items()}
    rows = (
        current()
        .values("hardware_id", "problem_id", "model_tag", submitter_id=F("submission__owner_id"))
        .annotate(**aggregates)
        .order_by()
    )
    pairs = Evaluation.objects.filter(state="done").values_list("problem_id", "hardware_id").distinct().order_by()
    with transaction.atomic():
        ResultCount.objects.all().delete()
        ResultCount.objects.bulk_create([ResultCount(**row) for row in rows], batch_size=2000)
        ProblemResultsVersion.objects.update(version=F("version") + 1)
        ProblemResultsVersion.objects.bulk_create(
            [ProblemResultsVersion(problem_id=p, hardware_id=h, version=1) for p, h in pairs], ignore_conflicts=True
        )
        ResultsVersion.objects.update(version=F("version") + 1)


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
    per_level = tuple(sorted(Counter(levels.values()).items()))
    n_problems = dict(per_level).get(level, 0) if level is not None else len(levels)
    scope = (n_problems, level, per_level, tuple(sorted(levels.items())))  # the figures' other inputs
    # Each model's figures are cached under a digest of their inputs, not the results version: after a
    # new result only its own model's are computed (and, on PostgreSQL, only its rows read) again.
    rows: dict[str, tuple[tuple, ...]] = {}
    query = _count_query(hardware, models, list(levels), include_unverified)
    if query is None:
        fingerprints = {}
    elif connection.vendor == "postgresql":
        fingerprints = dict(_fetch(_FINGERPRINTS_SQL.format(rows=query[0]), query[1]))
    else:
        rows = _by_model(_fetch(_SUMS_SQL.format(rows=query[0]), query[1]))
        fingerprints = {model: _fingerprint(r) for model, r in rows.items()}
    keys = {model: _figures_key(model, fp, scope) for model, fp in fingerprints.items()}
    found = cache.get_many(list(keys.values()))
    figures = {model: found[key] for model, key in keys.items() if key in found}
    missing = [model for model in keys if model not in figures]
    if missing:
        rows = rows or _by_model(_count_rows(hardware, missing, list(levels), include_unverified))
        fresh = {}
        for model in missing:
            if model in rows:  # else its results went meanwhile
                figures[model] = _model_figures(model, rows[model], levels, scope)
                # under what was read, should it have changed since the fingerprints
                fresh[_figures_key(model, _fingerprint(rows[model]), scope)] = figures[model]
        cache.set_many(fresh, settings.PKB_RESULTS_CACHE_S)
    result = ModelComparison(
        hardware=hardware, level=level, n_problems=n_problems, include_unverified=include_unverified
    )
    result.owners = dict(ModelName.objects.filter(name__in=list(figures)).values_list("name", "owner__username"))
    result.scores = sorted(
        (scores for scores, _ in figures.values() if scores is not None),
        key=lambda s: (-(s.fast_1 or 0), -(s.fast_0 or 0), s.model),
    )
    for lvl, _ in per_level:
        result.by_level[lvl] = {model: figures[model][1][lvl] for model in sorted(figures)}
    return result


# What else the figures depend on, so that figures cached before a change to it are not found after:
# the grids, and a number to raise whenever the way figures are computed from the counts changes.
_FIGURES_SCHEME = (metrics.P_GRID, metrics.U_GRID, metrics.K_CHOICES, metrics.BOOTSTRAP_DRAWS, tuple(COUNTS), 1)


def _figures_key(model: str, fingerprint: str, scope: tuple) -> str:
    return (
        "pkb:model-figures:" + hashlib.sha256(repr((_FIGURES_SCHEME, model, fingerprint, scope)).encode()).hexdigest()
    )


def _model_figures(
    model: str, rows: tuple[tuple, ...], levels: dict[int, int], scope: tuple
) -> tuple[ModelScores | None, dict[int, tuple[float | None, float | None]]]:
    """One model's scores (None without results in scope) and (fast_0, fast_1) on every level, from
    its rows (problem id, then COUNTS): a pure function of its arguments."""
    n_problems, level, per_level, _ = scope
    names = ("problem_id", *COUNTS)
    dicts = [{**dict(zip(names, row, strict=True)), "level": levels[row[0]]} for row in rows]
    in_scope = [r for r in dicts if level is None or r["level"] == level]
    one = _fast_key(metrics.P_GRID.index(1.0))
    by_level = {
        lvl: (
            metrics.estimate([(r["n"], r["correct_n"]) for r in dicts if r["level"] == lvl], count),
            metrics.estimate([(r["n"], r[one]) for r in dicts if r["level"] == lvl], count),
        )
        for lvl, count in per_level
    }
    return (_scores(model, in_scope, n_problems) if in_scope else None), by_level


def fast_p_curves(scores: list[ModelScores]) -> dict:
    """fast_p over p for each model, drawn where some curve changes (common.charts.threshold_curves)."""
    return charts.threshold_curves(
        metrics.P_GRID, {s.model: s.fast_p for s in scores}, "p", "fast_p", "p (speedup threshold)"
    )


def model_tags(hardware: Hardware | None = None, include_unverified: bool = False) -> list[str]:
    """The model tags with current results (on `hardware`), vouched for unless `include_unverified`."""
    qs = ResultCount.objects.filter(n__gt=0)
    if hardware is not None:
        qs = qs.filter(hardware=hardware)
    if not include_unverified:
        qs = qs.filter(vouched(submitter="submitter_id"))
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


# Per problem: pairs, both correct, identical digests, digests compared, ratios of speedups (b over
# a), and the sums of the ratios' logs and of their squares.
PAIRS_SQL = """
SELECT a.problem_id,
       count(*),
       count(*) FILTER (WHERE a.status = %(correct)s AND b.status = %(correct)s),
       count(*) FILTER (WHERE a.output_digest = b.output_digest),
       count(*) FILTER (WHERE a.output_digest IS NOT NULL AND b.output_digest IS NOT NULL),
       count(*) FILTER (WHERE a.speedup > 0 AND b.speedup > 0),
       sum(ln(b.speedup / a.speedup)) FILTER (WHERE a.speedup > 0 AND b.speedup > 0),
       sum(ln(b.speedup / a.speedup) * ln(b.speedup / a.speedup)) FILTER (WHERE a.speedup > 0 AND b.speedup > 0)
  FROM submissions_evaluation a
  JOIN submissions_evaluation b ON b.submission_id = a.submission_id
 WHERE a.hardware_id = %(a)s AND b.hardware_id = %(b)s
   AND a.state = 'done' AND b.state = 'done' AND NOT a.superseded AND NOT b.superseded
   AND NOT a.hidden AND NOT b.hidden
   AND a.problem_id IN ({problems})
 GROUP BY a.problem_id
"""
NO_PAIRS = (0, 0, 0, 0, 0, None, None)


def ratio_interval(geomean: float | None, n: int, mean_square: float | None) -> tuple[float, float] | None:
    """95% interval of a geometric mean of n ratios, from the mean and mean square of their logs."""
    if geomean is None or mean_square is None or n < 2:
        return None
    mean = math.log(geomean)
    variance = max(0.0, mean_square - mean * mean) * n / (n - 1)
    half = 1.96 * math.sqrt(variance / n)
    return (math.exp(mean - half), math.exp(mean + half))


def _pair_parts(a: Hardware, b: Hardware, problem_ids: list[int]) -> dict[int, tuple]:
    """problem id -> PAIRS_SQL's figures for it (NO_PAIRS where there is no pair). One query."""
    if not problem_ids:
        return {}
    params = {"a": a.pk, "b": b.pk, "correct": Status.CORRECT.value}
    params.update({f"p{i}": pk for i, pk in enumerate(problem_ids)})
    sql = PAIRS_SQL.format(problems=", ".join(f"%(p{i})s" for i in range(len(problem_ids))))
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        found = {row[0]: tuple(row[1:]) for row in cursor.fetchall()}
    return {pk: found.get(pk, NO_PAIRS) for pk in problem_ids}


def _summarize_pairs(parts: list[tuple]) -> tuple:
    total, both_correct, identical, compared, n = (sum(p[i] for p in parts) for i in range(5))
    if not n:
        return (total, both_correct, identical, compared, None, 0, None)
    log_sum = sum(p[5] for p in parts if p[4])
    square_sum = sum(p[6] for p in parts if p[4])
    return (total, both_correct, identical, compared, math.exp(log_sum / n), n, square_sum / n)


def pair_summary(a: Hardware, b: Hardware, problem: Problem | None) -> tuple:
    """(pairs, both correct, identical digests, digests compared, geometric mean of b/a speedups,
    ratios in that mean, mean square of their logs). Summed over problems, each problem's part
    cached under its results versions on a and b: after a new result only its problem is read again."""
    versions = ProblemResultsVersion.objects.filter(hardware__in=[a, b])
    if problem is not None:
        versions = versions.filter(problem=problem)
    on: dict[int, dict[int, int]] = defaultdict(dict)
    for problem_id, hardware_id, version in versions.values_list("problem_id", "hardware_id", "version"):
        on[problem_id][hardware_id] = version
    # A problem without finished results on both has no pair.
    keys = {
        pk: f"pkb:hardware-pairs/3:{a.pk}:{b.pk}:{pk}:{v[a.pk]}:{v[b.pk]}"
        for pk, v in on.items()
        if a.pk in v and b.pk in v
    }
    found = cache.get_many(list(keys.values()))
    missing = _pair_parts(a, b, sorted(pk for pk, key in keys.items() if key not in found))
    if missing:
        cache.set_many({keys[pk]: part for pk, part in missing.items()}, settings.PKB_RESULTS_CACHE_S)
    found.update({keys[pk]: part for pk, part in missing.items()})
    return _summarize_pairs([found[keys[pk]] for pk in sorted(keys)])


# The page's first rows, problem by problem (in the page's order) through the ev_visible index: one
# probe per row and its partner, and none past the last row shown, instead of sorting every pair.
ROWS_SQL = """
SELECT e.id
  FROM submissions_problem p
 CROSS JOIN LATERAL (
       SELECT e.id, e.speedup
         FROM submissions_evaluation e
        WHERE e.problem_id = p.id AND e.hardware_id = %(a)s
          AND e.state = 'done' AND NOT e.superseded AND NOT e.hidden
          AND EXISTS (SELECT 1 FROM submissions_evaluation b
                       WHERE b.submission_id = e.submission_id AND b.hardware_id = %(b)s
                         AND b.state = 'done' AND NOT b.superseded AND NOT b.hidden)
        ORDER BY e.speedup DESC, e.id
        LIMIT %(limit)s) e
 {where}
 ORDER BY p.level, p.pkb_id, e.speedup DESC, e.id
 LIMIT %(limit)s
"""


def _paired_ids(a: Hardware, b: Hardware, problem: Problem | None, limit: int) -> list[int]:
    """The first `limit` results on a that have a partner on b, by problem (level, number), speedup
    (highest first) and id."""
    if connection.vendor == "postgresql":
        params = {"a": a.pk, "b": b.pk, "limit": limit, "problem": problem.pk if problem else None}
        sql = ROWS_SQL.format(where="WHERE p.id = %(problem)s" if problem is not None else "")
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            return [row[0] for row in cursor.fetchall()]
    on_b = current(b).filter(hidden=False)
    on_a = current(a).filter(hidden=False, submission_id__in=on_b.values("submission_id"))
    if problem is not None:
        on_a = on_a.filter(problem=problem)
    return list(
        on_a.order_by("problem__level", "problem__pkb_id", "-speedup", "pk").values_list("pk", flat=True)[:limit]
    )


def compare_hardware(a: Hardware, b: Hardware, problem: Problem | None = None, limit: int = 200) -> HardwareComparison:
    """The same submissions' current results on two hardware, side by side (visible results only)."""
    ids = _paired_ids(a, b, problem, limit)
    # Pick the rows on the evaluation table alone, then load just those, with what the page shows.
    loaded = (
        Evaluation.objects.filter(pk__in=ids)
        .select_related("submission", "problem")
        .only("submission__id", "problem__slug", "model_tag", "status", "speedup", "output_digest")
        .in_bulk()
    )
    shown = [loaded[pk] for pk in ids]
    partners = {
        ev.submission_id: ev
        for ev in current(b)
        .filter(hidden=False, submission_id__in=[ev.submission_id for ev in shown])
        .only("submission_id", "speedup", "status", "output_digest")
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
