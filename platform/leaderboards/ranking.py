"""The ranking: the one definition of which results count and in what order. Every page, the API
and exports go through these functions.

- A submission's result on a hardware is its latest finished ("done") evaluation there: a rerun
  replaces the earlier figure instead of adding a second lottery ticket.
- Only correct, non-hidden results with a speedup rank.
- A leaderboard keeps each (owner, model tag)'s best speedup (geometric mean over shapes), in
  order of speedup (equal speedups: the earlier submission first). Each entry says whether the
  model name's owner vouches for it.
- Entries whose speedup intervals overlap are tied: they share a rank. A tie group starts at the
  highest entry not yet in one and takes every following entry whose interval overlaps the
  group's first (overlap is not transitive: chaining would tie the first and the last of a long
  list). Ranks count the entries above, as in sport (1, 1, 3). An entry without an interval (a
  result from before intervals) ties only with an equal speedup.
- Model comparisons count, by default, only runs the model name's owner vouches for (`vouched`).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass

from django.db.models import Count, Exists, F, Max, OuterRef, Q, QuerySet, Window
from django.db.models.functions import RowNumber

from catalog.models import Hardware, Problem
from evaluator.results import Status
from leaderboards.cache import cached_by_problem
from submissions.models import Evaluation, ModelName


def current(hardware: Hardware | int | None = None) -> QuerySet[Evaluation]:
    """Each submission's latest done evaluation on each hardware (or on the given one). A database
    trigger marks older done evaluations `superseded` (migration 0003)."""
    qs = Evaluation.objects.filter(state="done", superseded=False)
    return qs if hardware is None else qs.filter(hardware=hardware)


def eligible(hardware: Hardware | int | None = None) -> QuerySet[Evaluation]:
    """Current results that may rank."""
    return current(hardware).filter(status=Status.CORRECT.value, hidden=False, speedup__isnull=False)


def vouched(model_tag: str = "model_tag", submitter: str = "submission__owner_id") -> Exists:
    """An evaluation's model tag is registered (ModelName) and its owner vouches for the account that
    submitted it: its own runs, and those of the accounts it names. A condition on the evaluation
    row, so that a query using it stays one query; the field names say where another row (such as
    ResultCount's) holds the model tag and the submitting account."""
    submitter = OuterRef(submitter)
    return Exists(
        ModelName.objects.filter(name=OuterRef(model_tag)).filter(Q(owner_id=submitter) | Q(vouched_accounts=submitter))
    )


def is_vouched(model_tag: str, submitter_id: int) -> bool:
    """Whether the owner of the model name `model_tag` vouches for runs by `submitter_id`."""
    names = ModelName.objects.filter(name=model_tag)
    return names.filter(Q(owner_id=submitter_id) | Q(vouched_accounts=submitter_id)).exists()


ORDER = (F("speedup").desc(), F("submission__created_at").asc(), F("pk").asc())


def leaderboard_queryset(problem: Problem | int, hardware: Hardware | int) -> QuerySet[Evaluation]:
    best_per_entrant = Window(RowNumber(), partition_by=[F("submission__owner_id"), F("model_tag")], order_by=ORDER)
    return (
        eligible(hardware)
        .filter(problem=problem)
        .annotate(slot=best_per_entrant, vouched=vouched())
        .filter(slot=1)
        .select_related("submission__owner")
        .defer("result", "submission__code")  # large, and not shown in rankings
        .order_by(*ORDER)
    )


@dataclass(frozen=True)
class Entry:
    rank: int
    evaluation: Evaluation
    tied: bool = False  # shares its rank with another entry (overlapping intervals)

    @property
    def submission(self):
        return self.evaluation.submission

    @property
    def speedup_interval(self) -> tuple[float, float] | None:
        ev = self.evaluation
        return None if ev.speedup_low is None or ev.speedup_high is None else (ev.speedup_low, ev.speedup_high)


def _interval(ev: Evaluation) -> tuple[float, float]:
    if ev.speedup_low is None or ev.speedup_high is None:
        return (ev.speedup, ev.speedup)
    return (ev.speedup_low, ev.speedup_high)


def tie_ranks(evaluations: list[Evaluation]) -> list[tuple[int, bool]]:
    """(rank, tied) of each evaluation, given in ranking order (see the module's docstring)."""
    ranks: list[int] = []
    head = None  # the interval of the current tie group's first entry
    for position, ev in enumerate(evaluations, start=1):
        low, high = _interval(ev)
        if head is not None and low <= head[1] and head[0] <= high:
            ranks.append(ranks[-1])
        else:
            head = (low, high)
            ranks.append(position)
    sizes = Counter(ranks)
    return [(rank, sizes[rank] > 1) for rank in ranks]


def leaderboard(problem: Problem | int, hardware: Hardware | int, limit: int | None = None) -> list[Entry]:
    """The ranked entries; with `limit`, the first `limit` of them (one more is read, so that the
    last says whether it is tied with the next)."""
    qs = leaderboard_queryset(problem, hardware)
    evaluations = list(qs if limit is None else qs[: limit + 1])
    entries = [Entry(rank, ev, tied) for ev, (rank, tied) in zip(evaluations, tie_ranks(evaluations))]
    return entries if limit is None else entries[:limit]


def best_speedups(problem_ids=None) -> dict[tuple[int, int], float]:
    """(problem id, hardware id) -> best ranked speedup: the top of each leaderboard."""

    def compute(ids: list[int]) -> dict[int, dict[int, float]]:
        rows = eligible().filter(problem_id__in=ids).values("problem_id", "hardware_id").annotate(best=Max("speedup"))
        best: dict[int, dict[int, float]] = defaultdict(dict)
        for r in rows.order_by():
            best[r["problem_id"]][r["hardware_id"]] = r["best"]
        return best

    by_problem = cached_by_problem("best-speedups", compute, {}, problem_ids)
    return {(p, h): speedup for p, per_hardware in by_problem.items() for h, speedup in per_hardware.items()}


def solved_counts(problem_ids=None) -> dict[int, int]:
    """problem id -> how many submissions rank on at least one hardware."""

    def compute(ids: list[int]) -> dict[int, int]:
        rows = (
            eligible().filter(problem_id__in=ids).values("problem_id").annotate(n=Count("submission_id", distinct=True))
        )
        return {r["problem_id"]: r["n"] for r in rows.order_by()}

    return {p: n for p, n in cached_by_problem("solved-counts", compute, 0, problem_ids).items() if n}


def leading_submission_ids(per_problem: int, exclude_hardware: Hardware | None = None) -> list[int]:
    """The top `per_problem` submissions of every problem's leaderboard on every other active hardware."""
    hardware = Hardware.objects.filter(active=True)
    if exclude_hardware is not None:
        hardware = hardware.exclude(pk=exclude_hardware.pk)
    ids: dict[int, None] = {}
    for hw in hardware:
        for problem in Problem.objects.filter(active=True):
            for entry in leaderboard(problem, hw, limit=per_problem):
                ids[entry.evaluation.submission_id] = None
    return list(ids)
