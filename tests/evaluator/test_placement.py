"""CPU placement (evaluator/placement.py): the plan, and an evaluation that follows it."""

from __future__ import annotations

import os

import pytest

import tasks
from evaluator import placement
from evaluator.launch import EvaluationRequest, evaluate
from evaluator.placement import Placement


def test_each_rank_gets_a_slice_its_judge_leads():
    assert placement.plan(2, [7, 0, 1, 2, 3, 4, 5, 6]) == [
        Placement(judge=(0,), players=(1, 2, 3)), Placement(judge=(4,), players=(5, 6, 7))]


def test_one_player_cpu_puts_both_sides_of_a_rank_on_one_cpu():
    assert placement.plan(2, range(8), one_player_cpu=True) == [
        Placement(judge=(0,), players=(1,)), Placement(judge=(4,), players=(5,))]
    assert placement.plan(2, [0, 1], one_player_cpu=True) == [Placement((0,), (0,)), Placement((1,), (1,))]


def test_a_slice_of_one_cpu_is_shared_and_too_few_cpus_are_shared_by_all():
    assert placement.plan(2, [0, 1]) == [Placement((0,), (0,)), Placement((1,), (1,))]
    assert placement.plan(4, [0, 1]) == [Placement((0, 1), (0, 1))] * 4


def test_nothing_to_place_is_refused():
    with pytest.raises(ValueError):
        placement.plan(0, [0])
    with pytest.raises(ValueError):
        placement.plan(1, [])


def test_off_unless_the_host_asks(monkeypatch):
    monkeypatch.delenv(placement.ENV, raising=False)
    assert placement.for_host(2) is None
    monkeypatch.setenv(placement.ENV, "1")
    assert placement.for_host(1) == placement.plan(1, sorted(os.sched_getaffinity(0)))
    monkeypatch.setenv(placement.ENV, "one")
    assert placement.for_host(1) == placement.plan(1, sorted(os.sched_getaffinity(0)), one_player_cpu=True)
    monkeypatch.setenv(placement.ENV, "yes")  # not a setting: off
    assert placement.for_host(1) is None


SEES_ITS_CPUS = """

import os as _os

_reference_solution = solution


def solution(*inputs):
    if _os.sched_getaffinity(0) != EXPECTED:
        raise RuntimeError(f"players run on {sorted(_os.sched_getaffinity(0))}, not {sorted(EXPECTED)}")
    return _reference_solution(*inputs)
"""


def test_pinned_players_run_on_their_ranks_cpus(monkeypatch):
    """Both sides' players (the solution checks its own) run on the CPUs the plan gives them."""
    monkeypatch.setenv(placement.ENV, "1")
    (expected,) = placement.plan(1, sorted(os.sched_getaffinity(0)))
    code = tasks.reference_source("allreduce") + SEES_ITS_CPUS.replace("EXPECTED", repr(set(expected.players)))
    request = EvaluationRequest(problem="allreduce", solution_code=code, world_size=1, mode="cpu", shapes=["small"],
                                warmup=1, iters=2, trials=1, timeout_s=60, timing_budget_s=0)
    doc = evaluate(request)
    assert doc["status"] == "correct", doc["reason"]
    monkeypatch.delenv(placement.ENV)  # read when an evaluation starts
    unpinned = evaluate(request)
    if len(os.sched_getaffinity(0)) > 1:  # with one CPU, pinned or not is the same set
        assert unpinned["status"] == "runtime_error" and "players run on" in unpinned["reason"]
