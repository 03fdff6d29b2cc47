"""Aggregates over every result (the catalog's, model comparisons, hardware pairs) cached under the
database's results version: a trigger raises it whenever a ranked column of an evaluation changes
(migration 0003), so a cached value is never stale, only recomputed. Aggregates that split by problem
are cached problem by problem under ProblemResultsVersion (migration 0007), so that a new result
recomputes its own problem's part only."""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Callable, Iterable
from typing import TypeVar

from django.conf import settings
from django.core.cache import cache

from submissions.models import ProblemResultsVersion, ResultsVersion

T = TypeVar("T")


def results_version() -> int:
    return ResultsVersion.objects.values_list("version", flat=True).first() or 0


def cached(name: str, params: tuple, compute: Callable[[], T]) -> T:
    digest = hashlib.sha256(repr(params).encode()).hexdigest()[:16]
    key = f"pkb:{name}:{results_version()}:{digest}"
    value = cache.get(key)
    if value is None:
        value = compute()
        cache.set(key, value, settings.PKB_RESULTS_CACHE_S)
    return value


def cached_by_problem(
    name: str, compute: Callable[[list[int]], dict[int, T]], empty: T, problem_ids: Iterable[int] | None = None
) -> dict[int, T]:
    """problem id -> compute(ids)[problem id] for every problem with finished results (of
    `problem_ids`), each cached under the problem's results versions on every hardware; `empty` for
    a problem that `compute` leaves out (a cache may not hold None)."""
    versions = ProblemResultsVersion.objects.all()
    if problem_ids is not None:
        versions = versions.filter(problem_id__in=list(problem_ids))
    on: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for problem_id, hardware_id, version in versions.values_list("problem_id", "hardware_id", "version"):
        on[problem_id].append((hardware_id, version))
    keys = {pk: f"pkb:{name}:{pk}:" + ",".join(f"{h}={version}" for h, version in sorted(v)) for pk, v in on.items()}
    found = cache.get_many(list(keys.values()))
    missing = [pk for pk, key in keys.items() if key not in found]
    if missing:
        fresh = compute(missing)
        found.update({keys[pk]: fresh.get(pk, empty) for pk in missing})
        cache.set_many({keys[pk]: found[keys[pk]] for pk in missing}, settings.PKB_RESULTS_CACHE_S)
    return {pk: found[key] for pk, key in keys.items()}
