"""Whose GPU memory it was when the judge ran out (evaluator/gpu_memory.py); the judge's use of it
runs on a GPU (tests/adversarial/test_gpu_attacks.py, the memory hog)."""

from __future__ import annotations

import subprocess

from evaluator import gpu_memory

GIB = 1 << 30


def test_the_drivers_lines_are_read_per_process_and_summed_over_gpus():
    text = "101, 2048\n202, 512\n101, 1024\n[N/A], 300\n\nnot a line\n"
    assert gpu_memory.parse_held(text) == {101: 3072 << 20, 202: 512 << 20}


def test_the_solution_is_named_when_its_processes_hold_more_than_the_references():
    held = {10: 70 * GIB, 11: 2 * GIB, 20: 3 * GIB, 99: 1 * GIB}  # 99: the judge, no side's
    reason = gpu_memory.solutions_share(held, solution_pids=[10, 11], reference_pids=[20, 21])
    assert reason is not None and "solution's processes held 72.0 GiB" in reason and "reference's 3.0 GiB" in reason


def test_nothing_is_said_where_the_solution_holds_no_more_or_nothing_is_known():
    assert gpu_memory.solutions_share({10: GIB, 20: 2 * GIB}, [10], [20]) is None
    assert gpu_memory.solutions_share({10: GIB, 20: GIB}, [10], [20]) is None  # identical code holds as much
    assert gpu_memory.solutions_share({}, [10], [20]) is None  # the driver showed no processes


def test_a_host_without_the_driver_tool_knows_nothing(monkeypatch):
    def missing(*args, **kwargs):
        raise FileNotFoundError("nvidia-smi")

    monkeypatch.setattr(subprocess, "run", missing)
    assert gpu_memory.held_by_pid() == {}
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: subprocess.CompletedProcess(a, 9, "101, 5\n", "failed"))
    assert gpu_memory.held_by_pid() == {}  # a failed query is no answer
