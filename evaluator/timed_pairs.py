"""A shape's timed pairs, as the judge reads them: the order of each pair's batches, a pair's
batch times across ranks, the time per call less the protocol's fixed cost, and each side's
allocator counts around the pairs: torch-free arithmetic on the judge's readings
(evaluator/judge.py), apart from the clock and the processes that make them.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from evaluator.results import SIDES, AllocatorActivity, BatchOrder, Side


def fixed_cost_ns(rows: list[tuple[int, int, int]]) -> int:
    """The protocol's cost per batch: the median null batch."""
    column = sorted(r[2] for r in rows)
    return column[len(column) // 2]


def per_call_us(rows: list[tuple[int, int, int]], calls: int) -> tuple[list[float], list[float]]:
    """(reference, solution) time per call in each pair of `rows` (reference ns, solution ns,
    null ns), less the fixed cost."""
    fixed = fixed_cost_ns(rows)
    return ([max(0, r[0] - fixed) / calls / 1e3 for r in rows], [max(0, r[1] - fixed) / calls / 1e3 for r in rows])


ALLOCATOR_COUNTERS = tuple(f.name for f in dataclasses.fields(AllocatorActivity))
MAX_COUNT = 2**53  # a count beyond what every JSON reader keeps exactly is no real allocator's


def allocator_reading(answer: Any) -> dict[str, int] | None:
    """A player's answer about its allocator (player.op_allocator) as counters, or None where it is
    not counters: the solution's player may answer anything."""
    valid = isinstance(answer, dict) and all(type(answer.get(k)) is int and 0 <= answer[k] < MAX_COUNT
                                             for k in ALLOCATOR_COUNTERS)
    return {k: answer[k] for k in ALLOCATOR_COUNTERS} if valid else None


def allocator_change(before: dict | None, after: dict | None) -> dict[str, dict[str, int] | None]:
    """Each side's counters' change between two readings (allocator_counts); None for a side
    without both, or whose counters went back (not a real allocator's)."""
    change = {}
    for side in SIDES:
        b, a = (before or {}).get(side), (after or {}).get(side)
        diff = {k: a[k] - b[k] for k in ALLOCATOR_COUNTERS} if a and b else None
        change[side] = diff if diff and min(diff.values()) >= 0 else None
    return change


def across_ranks(stamps: list[tuple[tuple[int, int], ...]]) -> tuple[int, ...]:
    """One pair's batch times for the problem, from every rank's (start, end) clock readings per
    batch (reference, solution, null): from the moment the last rank started until the last
    rank's outputs were read. The ranks' judges share the host's monotonic clock. A rank that
    starts early waits in its first collective for the others; counting that wait would add the
    judges' start skew, which no null batch (without collectives) measures, to every batch."""
    return tuple(max(s[i][1] for s in stamps) - max(s[i][0] for s in stamps) for i in range(len(stamps[0])))


TIMED_KEYS = (Side.REFERENCE, Side.SOLUTION, "null")  # a timed pair's batches, in the rows' order


def pair_schedule(index: int, batch_order: str = BatchOrder.SYMMETRIC) -> tuple[tuple[str, ...], bool]:
    """The timed pair `index`'s sides in order, and whether its null batch (on the reference's
    player) comes first rather than last. Symmetric: solution, reference, null | null,
    reference, solution | ...; where the players share a CPU, whichever ran last left its caches
    warm, and here each side follows its own player in half its batches. The earlier order
    (reference, solution, null | solution, reference, null) gave the reference that in half its
    batches and the solution never."""
    even = index % 2 == 0
    if batch_order == BatchOrder.REFERENCE_WARM:
        return (SIDES if even else SIDES[::-1]), False
    return (SIDES[::-1] if even else SIDES), not even
