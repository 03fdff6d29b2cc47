"""The document's per-shape timing, from the judges' reports (evaluator/assemble.py)."""

from __future__ import annotations

from types import SimpleNamespace

from evaluator import assemble
from evaluator.results import ShapeResult, Status

SHAPE = {"name": "small", "dims": {"M": 8}, "default": True}


def report(reference: list[float], solution: list[float]) -> dict:
    """One rank's report of a timed shape; the problem's times across ranks as given."""
    return {
        "name": "small", "notes": [], "max_abs_error": 0.0, "digest_solution": "a", "digest_reference": "a",
        "reference_us": reference, "solution_us": solution,
        "across_ranks_us": {"reference": reference, "solution": solution},
        "batch": {"calls": 4, "batches": len(reference), "fixed_us": 30.0, "stop": "budget", "seconds": 2.0},
    }  # fmt: skip


def entry(reference: list[float], solution: list[float]) -> ShapeResult:
    ranks = [SimpleNamespace(final={"shapes": [report(reference, solution)]}) for _ in range(2)]
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
