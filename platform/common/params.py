"""Query-string values read by several views: whatever arrives, a valid value or None (never an
exception, so never a 500)."""

from __future__ import annotations

from tasks.spec import LEVELS, PARALLELISM


def level(value: str | None) -> int | None:
    """A problem level ("1".."6"); None for anything else ("", "7", "²", "١", a thousand digits)."""
    if not value or len(value) > 3 or not (value.isascii() and value.isdigit()):
        return None
    return int(value) if int(value) in LEVELS else None


def parallelism(value: str | None) -> str:
    """One of the suite's parallelism kinds, or "" (all)."""
    return value if value in PARALLELISM else ""
