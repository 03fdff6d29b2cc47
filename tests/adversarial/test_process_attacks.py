"""Attacks on the judge's processes and channels: forged result messages, stolen seeds, killing the
evaluator, processes left behind, hangs, and floods of output. Every one must end in a result
document, in bounded time, with nothing left running (`adv.judge` checks the last)."""

from __future__ import annotations

import time

import pytest

from evaluator.results import Status


@pytest.mark.parametrize("variant", ["fds", "nonce"])
def test_a_forged_result_is_not_believed(adv, variant):
    doc = adv.judge("allreduce", "forged_result", variant=variant)
    adv.assert_not_faster(doc)


def test_seeds_cannot_be_stolen(adv):
    doc = adv.judge("allreduce", "steal_seeds")
    for marker in ("PKB-ATTACK-SEEDS-FOUND", "PKB-ATTACK-SEED-MATCH", '"shared_seed"'):
        assert marker not in doc["log_tail"], f"{marker} in the log: {adv.summary(doc)}"
    adv.assert_not_correct(doc)


@pytest.mark.parametrize("variant", ["parent", "group", "everyone"])
def test_killing_the_evaluator_still_gives_a_document(adv, variant, request):
    if variant in ("parent", "everyone"):  # unsandboxed, these could reach the test runner or the machine
        request.getfixturevalue("sandboxed")
    doc = adv.judge("allreduce", "kill_evaluator", variant=variant, params=adv.runner_identity())
    adv.assert_document_bounded(doc, 60)
    # A sandbox may leave it nothing to signal (a parent outside its PID namespace is pid 0), and
    # kill(-1) spares its sender: then it computed honestly. Otherwise someone was killed.
    if doc["status"] == "correct":
        assert variant == "everyone" or "no target it may signal" in doc["log_tail"], adv.summary(doc)
    else:
        assert doc["status"] in ("runtime_error", "rejected"), adv.summary(doc)


@pytest.mark.parametrize("variant", ["daemon", "ignore_sigterm", "fork_bomb", "thread"])
def test_processes_left_behind_are_killed(adv, variant, tmp_path, request):
    if variant == "fork_bomb":
        request.getfixturevalue("sandboxed")
    heartbeat = tmp_path / "heartbeat"
    doc = adv.judge("allreduce", "leave_processes", variant=variant, params={"HEARTBEAT": str(heartbeat)})
    assert doc["status"] in list(Status)
    adv.assert_document_bounded(doc, 60)
    # Whatever was left, in whichever PID namespace, has stopped beating.
    before = heartbeat.stat().st_size if heartbeat.exists() else 0
    time.sleep(0.5)
    after = heartbeat.stat().st_size if heartbeat.exists() else 0
    assert after == before, f"something the attack left still runs ({before} -> {after} heartbeats)"


HANG_LIMIT_S = 20


@pytest.mark.slow
@pytest.mark.parametrize("variant", ["sleep", "collective"])
def test_a_hang_ends_in_a_timeout(adv, variant):
    if variant == "collective" and adv.DEFAULT_WORLD < 2:
        pytest.skip("a collective that no other rank joins needs two ranks; alone, it completes")
    doc = adv.judge("allreduce", "hang", variant=variant, timeout_s=HANG_LIMIT_S)
    assert doc["status"] in ("timeout", "runtime_error"), adv.summary(doc)
    adv.assert_document_bounded(doc, HANG_LIMIT_S + 15)


@pytest.mark.slow
@pytest.mark.parametrize("variant", ["stdout", "stderr"])
def test_a_flood_of_output_is_cut(adv, variant):
    doc = adv.judge("allreduce", "flood_output", variant=variant, params={"MEGABYTES": 200})
    assert doc["status"] in list(Status)
    adv.assert_document_bounded(doc, 60)


def test_a_solution_cannot_change_the_recorded_layout_of_its_players(adv):
    """environment.player_layout comes from each player's persona at init, before the solution is
    loaded: a solution that clears its persona afterwards leaves the record as it was."""
    doc = adv.judge_appended("allreduce", "layout_record")
    assert doc["status"] == "correct", adv.summary(doc)
    expected = adv.honest("allreduce")["environment"]["player_layout"]
    assert expected is not None
    assert doc["environment"]["player_layout"] == expected, adv.summary(doc)
