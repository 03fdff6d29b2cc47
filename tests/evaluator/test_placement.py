"""CPU placement (evaluator/placement.py): the plan, and an evaluation that follows it."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from process_trees import kill_tree

import tasks
from evaluator import placement
from evaluator.launch import EvaluationRequest, evaluate
from evaluator.placement import Placement


def test_each_rank_gets_a_slice_its_judge_leads():
    assert placement.plan(2, [7, 0, 1, 2, 3, 4, 5, 6]) == [
        Placement(judge=(0,), players=(1, 2, 3)), Placement(judge=(4,), players=(5, 6, 7))]


def test_one_player_cpu_puts_both_sides_of_a_rank_on_one_cpu_once_they_have_loaded():
    assert placement.plan(2, range(8), one_player_cpu=True) == [
        Placement(judge=(0,), players=(1,), loading=(1, 2, 3)), Placement(judge=(4,), players=(5,), loading=(5, 6, 7))]
    assert placement.plan(2, range(4), one_player_cpu=True) == [
        Placement(judge=(0,), players=(1,)), Placement(judge=(2,), players=(3,))]
    assert placement.plan(2, [0, 1], one_player_cpu=True) == [Placement((0,), (0,)), Placement((1,), (1,))]


def test_a_slice_of_one_cpu_is_shared_and_too_few_cpus_are_shared_by_all():
    assert placement.plan(2, [0, 1]) == [Placement((0,), (0,)), Placement((1,), (1,))]
    assert placement.plan(4, [0, 1]) == [Placement((0, 1), (0, 1))] * 4


def test_nothing_to_place_is_refused():
    with pytest.raises(ValueError):
        placement.plan(0, [0])
    with pytest.raises(ValueError):
        placement.plan(1, [])


def test_gpu_mode_shares_a_cpu_per_rank_unless_the_host_says_otherwise(monkeypatch):
    cpus = sorted(os.sched_getaffinity(0))
    monkeypatch.delenv(placement.ENV, raising=False)
    assert placement.for_host(2, "cpu") is None and placement.for_host(2, "shared-gpu") is None
    expected = placement.plan(1, cpus, one_player_cpu=True) if len(cpus) >= 2 else None
    assert placement.for_host(1, "gpu") == expected
    assert placement.for_host(len(cpus), "gpu") is None  # too few CPUs for a judge's and the players' own
    monkeypatch.setenv(placement.ENV, "0")
    assert placement.for_host(1, "gpu") is None
    monkeypatch.setenv(placement.ENV, "1")
    assert placement.for_host(1, "cpu") == placement.plan(1, cpus)
    monkeypatch.setenv(placement.ENV, "one")
    assert placement.for_host(1, "cpu") == placement.plan(1, cpus, one_player_cpu=True)
    assert placement.for_host(4 * len(cpus), "gpu") == placement.plan(4 * len(cpus), cpus, one_player_cpu=True)  # asked for
    monkeypatch.setenv(placement.ENV, "yes")  # not a setting: the mode's default
    assert placement.for_host(1, "cpu") is None and placement.for_host(1, "gpu") == expected


SEES_ITS_CPUS = """

import os as _os
import threading as _threading

if _os.sched_getaffinity(0) != LOADING:
    raise RuntimeError(f"players load on {sorted(_os.sched_getaffinity(0))}, not {sorted(LOADING)}")
_started_at_import = _threading.Thread(target=_threading.Event().wait, daemon=True)
_started_at_import.start()
_reference_solution = solution


def solution(*inputs):
    for tid in (0, _started_at_import.native_id):
        if _os.sched_getaffinity(tid) != EXPECTED:
            raise RuntimeError(f"players run on {sorted(_os.sched_getaffinity(tid))}, not {sorted(EXPECTED)}")
    return _reference_solution(*inputs)
"""


def sees_its_cpus(expected: Placement) -> str:
    return tasks.reference_source("allreduce") + SEES_ITS_CPUS.replace("EXPECTED", repr(set(expected.players))).replace(
        "LOADING", repr(set(expected.start)))


PLACED_REQUEST = dict(problem="allreduce", world_size=1, mode="cpu", shapes=["small"], warmup=1, iters=2, trials=1,
                      timeout_s=60, timing_budget_s=0)


@pytest.mark.parametrize("setting", ["1", "one"])
def test_pinned_players_run_on_their_ranks_cpus(monkeypatch, setting):
    """Both sides' players (the solution checks its own) run on the CPUs the plan gives them, and
    an honest solution that stays there is judged (the judge refuses one that leaves them:
    tests/adversarial/test_timing_attacks.py)."""
    monkeypatch.setenv(placement.ENV, setting)
    (expected,) = placement.plan(1, sorted(os.sched_getaffinity(0)), one_player_cpu=setting == "one")
    request = EvaluationRequest(solution_code=sees_its_cpus(expected), **PLACED_REQUEST)
    doc = evaluate(request)
    assert doc["status"] == "correct", doc["reason"]
    monkeypatch.delenv(placement.ENV)  # read when an evaluation starts
    unpinned = evaluate(request)
    if len(os.sched_getaffinity(0)) > 1:  # with one CPU, pinned or not is the same set
        assert unpinned["status"] == "runtime_error" and "players load on" in unpinned["reason"]


def test_players_load_on_their_slice_and_every_thread_is_timed_on_their_cpu(monkeypatch):
    """The players import and build on several CPUs, then the judge moves every thread they have
    (the solution's thread started at import too) onto the one CPU both sides share."""
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        pytest.skip("needs two CPUs to load on more than the players are timed on")
    plan = [Placement(judge=(cpus[0],), players=(cpus[1],), loading=tuple(cpus))]
    monkeypatch.setattr(placement, "for_host", lambda world_size, mode: plan)
    doc = evaluate(EvaluationRequest(solution_code=sees_its_cpus(plan[0]), **PLACED_REQUEST))
    assert doc["status"] == "correct", doc["reason"]


def test_settle_moves_threads_started_before_and_after_it():
    """Every thread below the root moves from its rank's loading CPUs to the rank's players' CPUs,
    and what a moved thread starts afterwards starts there."""
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        pytest.skip("needs two CPUs to load on more than the players are timed on")
    plan = [Placement(judge=(cpus[0],), players=(cpus[1],), loading=tuple(cpus))]
    child = (f"import os, sys, threading; os.sched_setaffinity(0, {set(cpus)!r})\n"
             "for _ in range(3): threading.Thread(target=threading.Event().wait, daemon=True).start()\n"
             "print('ready', flush=True); sys.stdin.readline()\n"
             "later = []; t = threading.Thread(target=lambda: later.append(os.sched_getaffinity(0))); t.start(); t.join()\n"
             "print(sorted(later[0]), flush=True)\n")
    root = subprocess.Popen(["sh", "-c", f'"{sys.executable}" -c "$0"', child], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    try:
        assert root.stdout.readline().strip() == "ready"
        (pid,) = placement.descendants(root.pid)
        assert len(placement.threads_cpus(pid)) == 4
        assert all(found == set(cpus) for found in placement.threads_cpus(pid).values())
        assert placement.settle(root.pid, plan) == []
        assert all(found == {cpus[1]} for found in placement.threads_cpus(pid).values())
        root.stdin.write("\n")
        root.stdin.flush()
        assert root.stdout.readline().strip() == str([cpus[1]])
    finally:
        kill_tree(root)


def test_a_worker_keeps_to_the_cpus_its_host_gives_it(monkeypatch):
    from evaluator.worker import worker_cpus

    mine = sorted(os.sched_getaffinity(0))
    monkeypatch.delenv(placement.WORKER_ENV, raising=False)
    assert worker_cpus() is None
    monkeypatch.setenv(placement.WORKER_ENV, f"{mine[0]}")
    assert worker_cpus() == {mine[0]}
    for wrong in ("all", f"{max(mine) + 1}-{max(mine) + 4}"):
        monkeypatch.setenv(placement.WORKER_ENV, wrong)
        with pytest.raises(SystemExit, match=placement.WORKER_ENV):
            worker_cpus()
