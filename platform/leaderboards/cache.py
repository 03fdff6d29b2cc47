"""Aggregates over every result (catalog best speedups, model-comparison counts, hardware pairs)
cached under the database's results version: a trigger raises it whenever a ranked column of an
evaluation changes (migration 0003), so a cached value is never stale, only recomputed."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import TypeVar

from django.conf import settings
from django.core.cache import cache

from submissions.models import ResultsVersion

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
