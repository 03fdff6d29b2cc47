"""The document's per-shape timing, from the judges' reports (evaluator/assemble.py)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from evaluator import assemble, timed_pairs
from evaluator.results import AllocatorActivity, ShapeResult, Side, Status

SHAPE = {"name": "small", "dims": {"M": 8}, "default": True}


def report(reference: list[float], solution: list[float]) -> dict:
    """One rank's report of a timed shape; the problem's times across ranks as given."""
    return {
        "name": "small", "notes": [], "max_abs_error": 0.0, "digest_solution": "a", "digest_reference": "a",
        "reference_us": reference, "solution_us": solution,
        "across_ranks_us": {"reference": reference, "solution": solution},
        "batch": {"calls": 4, "batches": len(reference), "fixed_us": 30.0, "stop": "budget", "seconds": 2.0},
    }  # fmt: skip


def entry(reference: list[float], solution: list[float], allocator: list[dict] | None = None) -> ShapeResult:
    """The shape's entry from two ranks' reports; `allocator`: each rank's timed_pairs.allocator_change."""
    reports = [report(reference, solution) for _ in range(2)]
    for rank_report, change in zip(reports, allocator or []):
        rank_report["allocator"] = change
    ranks = [SimpleNamespace(final={"shapes": [r]}) for r in reports]
    return assemble._shape_entry(SHAPE, ranks, Status.CORRECT, None, None, None, meaningful=False)


def test_the_speedup_and_its_interval_come_from_the_times_across_ranks():
    shape = entry([10.0] * 12, [5.0] * 12)
    assert shape.speedup == 2.0 and shape.speedup_interval == [2.0, 2.0]
    assert shape.reference.time_us == 10.0 and shape.solution.time_us == 5.0


def test_batches_within_the_protocols_cost_leave_the_interval_open_with_a_note():
    """A tiny shape: a solution's batch may take no longer than the null batch, its time per call
    then reads 0 and its ratio is unbounded. The document must still be valid: no upper bound is
    given, and the note says why."""
    shape = entry([10.0] * 12, [5.0] * 9 + [0.0] * 3)
    assert shape.speedup == 2.0
    assert shape.speedup_interval is None
    assert assemble.UNBOUNDED in shape.notes


def counts(allocs: int, frees: int = 0, retries: int = 0) -> dict:
    return {"device_allocs": allocs, "device_frees": frees, "retries": retries}


def test_each_sides_allocator_counts_are_kept_per_rank_where_every_rank_has_them():
    shape = entry([10.0] * 12, [5.0] * 12, allocator=[
        {"reference": counts(0), "solution": counts(3, 2, 1)},
        {"reference": counts(1), "solution": None},  # this rank's solution player reported no counts
    ])
    assert set(shape.timing_run.allocator) == {Side.REFERENCE}
    assert shape.timing_run.allocator[Side.REFERENCE] == AllocatorActivity([0, 1], [0, 0], [0, 0])


def test_no_allocator_record_on_the_cpu_or_from_judges_that_kept_none():
    cpu = {"reference": None, "solution": None}  # timed_pairs.allocator_change of two CPU players
    assert entry([10.0] * 12, [5.0] * 12, allocator=[cpu, cpu]).timing_run.allocator is None
    assert entry([10.0] * 12, [5.0] * 12).timing_run.allocator is None  # an earlier judge's report


def test_the_change_over_the_timed_pairs_is_after_less_before_and_no_change_where_counters_went_back():
    before = {"reference": counts(5, 5, 0), "solution": counts(2, 1, 0)}
    after = {"reference": counts(5, 5, 0), "solution": counts(9, 7, 1)}
    assert timed_pairs.allocator_change(before, after) == {"reference": counts(0), "solution": counts(7, 6, 1)}
    # A solution's player may report anything, counters that go back included: no change recorded.
    assert timed_pairs.allocator_change(after, before) == {"reference": counts(0), "solution": None}
    assert timed_pairs.allocator_change(None, after) == {"reference": None, "solution": None}  # a failed reading


@pytest.mark.parametrize("answer", [
    None, "counts", [1, 2, 3], {"device_allocs": 1, "device_frees": 1},  # not counters, or not all three
    {"device_allocs": -1, "device_frees": 0, "retries": 0},
    {"device_allocs": 1, "device_frees": "many", "retries": 0},
    {"device_allocs": 1, "device_frees": 1.0, "retries": 0},
    {"device_allocs": True, "device_frees": 0, "retries": 0},
    {"device_allocs": 0, "device_frees": 0, "retries": 10**30},
], ids=["none", "string", "list", "partial", "negative", "text", "float", "bool", "huge"])
def test_a_players_answer_that_is_not_counters_reads_as_none(answer):
    assert timed_pairs.allocator_reading(answer) is None


def test_a_players_counters_are_read_without_anything_else_it_sent():
    answer = {"device_allocs": 4, "device_frees": 3, "retries": 0, "note": "x" * 10_000}
    assert timed_pairs.allocator_reading(answer) == counts(4, 3, 0)
