"""Whose GPU memory it was when the judge or the reference ran out (evaluator/gpu_memory.py, and
the judge's decision from it with the driver's answer stubbed); the whole path runs on a GPU (tests/adversarial/test_gpu_attacks.py, the memory hog)."""

from __future__ import annotations

import socket
import subprocess

import pytest
import torch

from evaluator import gpu_memory, transport
from evaluator.judge import HostError, Judge, Link, ReferenceOutOfMemory, Verdict
from evaluator.results import Status

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
    assert gpu_memory.solutions_share({10: GIB, 555: GIB}, [10], [20]) is None  # none of the reference's


def test_a_host_without_the_driver_tool_knows_nothing(monkeypatch):
    def missing(*args, **kwargs):
        raise FileNotFoundError("nvidia-smi")

    monkeypatch.setattr(subprocess, "run", missing)
    assert gpu_memory.held_by_pid() == {}
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: subprocess.CompletedProcess(a, 9, "101, 5\n", "failed"))
    assert gpu_memory.held_by_pid() == {}  # a failed query is no answer


def test_the_references_own_shortage_is_the_solutions_when_it_holds_more():
    blame, why = gpu_memory.reference_shortage({10: 70 * GIB, 20: 3 * GIB}, [10], [20])
    assert blame == gpu_memory.Blame.SOLUTION
    assert "reference ran out of GPU memory" in why and "solution's processes held 70.0 GiB" in why


def test_the_references_own_shortage_is_the_hosts_when_the_solution_holds_no_more():
    blame, why = gpu_memory.reference_shortage({10: 2 * GIB, 20: 60 * GIB}, [10], [20])
    assert blame == gpu_memory.Blame.HOST and "short of memory for the reference by itself" in why
    assert gpu_memory.reference_shortage({}, [10], [20]) == (gpu_memory.Blame.UNKNOWN, "")
    # Process ids of another namespace: the driver shows processes, none of them the reference's,
    # whose context always holds some memory; not the host's failure on that evidence.
    assert gpu_memory.reference_shortage({5001: 9 * GIB, 5002: 9 * GIB}, [10], [20]) == (gpu_memory.Blame.UNKNOWN, "")


# The judge's handling: a reference's OutOfMemoryError, as its player reports it, decided by whose
# processes hold the GPU (the driver's answer stubbed).

def reference_link_answering(reply: dict):
    ours, theirs = socket.socketpair()
    transport.send(theirs, reply)
    return Link(ours.detach(), "reference", torch.device("cpu")), theirs


def judge_seeing(monkeypatch, held: dict[int, int]):
    judge = Judge.__new__(Judge)  # only its sandbox question: the processes are stubbed
    monkeypatch.setattr(Judge, "sandbox_pids", lambda self: {"solution": [10], "reference": [20]})
    monkeypatch.setattr(gpu_memory, "held_by_pid", lambda: held)
    return judge


OOM = {"ok": False, "kind": "runtime_error", "reason": "OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
       "traceback": "Traceback ...\ntorch.OutOfMemoryError: CUDA out of memory"}


def test_a_references_out_of_memory_is_told_apart_from_its_other_failures():
    link, _peer = reference_link_answering(OOM)
    with pytest.raises(ReferenceOutOfMemory) as caught:
        link.answer("run")
    assert caught.value.reason.startswith("OutOfMemoryError: CUDA out of memory") and "Traceback" in caught.value.detail
    # The CUDA runtime's own out-of-memory, from an allocation outside the caching allocator: how a
    # reference starved by a solution holding the GPU failed in shared-gpu mode on an H100.
    runtime_oom = "AcceleratorError: CUDA error: out of memory\nSearch for `cudaErrorMemoryAllocation' in ..."
    link, _peer = reference_link_answering({**OOM, "reason": runtime_oom})
    with pytest.raises(ReferenceOutOfMemory):
        link.answer("run")
    link, _peer = reference_link_answering({**OOM, "reason": "RuntimeError: NCCL error"})
    with pytest.raises(Verdict, match="the reference raised RuntimeError: NCCL error"):
        link.answer("run")


def test_a_reference_out_of_memory_beside_a_solution_holding_the_gpu_is_the_solutions_runtime_error(monkeypatch):
    judge = judge_seeing(monkeypatch, {10: 75 * GIB, 20: 2 * GIB})
    verdict = judge.reference_out_of_memory_verdict(ReferenceOutOfMemory(OOM["reason"], OOM["traceback"]))
    assert verdict.status == Status.RUNTIME_ERROR
    assert "solution's processes held 75.0 GiB" in verdict.reason and "the reference raised OutOfMemoryError" in verdict.reason


def test_a_reference_out_of_memory_with_the_solution_holding_less_is_the_hosts_failure(monkeypatch):
    judge = judge_seeing(monkeypatch, {10: 1 * GIB, 20: 70 * GIB})
    with pytest.raises(HostError, match="short of memory for the reference by itself: OutOfMemoryError"):
        judge.reference_out_of_memory_verdict(ReferenceOutOfMemory(OOM["reason"], OOM["traceback"]))


def test_a_reference_out_of_memory_the_driver_cannot_attribute_stays_the_solutions_runtime_error(monkeypatch):
    judge = judge_seeing(monkeypatch, {})
    verdict = judge.reference_out_of_memory_verdict(ReferenceOutOfMemory(OOM["reason"], OOM["traceback"]))
    assert verdict.status == Status.RUNTIME_ERROR and verdict.reason.startswith("the reference raised OutOfMemoryError")


def test_out_of_memory_is_read_from_the_allocators_error_and_the_cuda_runtimes():
    assert gpu_memory.reads_as_out_of_memory("OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB")
    assert gpu_memory.reads_as_out_of_memory("AcceleratorError: CUDA error: out of memory\nCUDA kernel errors ...")
    assert not gpu_memory.reads_as_out_of_memory("AcceleratorError: CUDA error: an illegal memory access was encountered")
    assert not gpu_memory.reads_as_out_of_memory("RuntimeError: the solution printed OutOfMemoryError: somewhere")


def test_a_reference_that_ran_short_while_timed_beside_a_larger_solution_gives_no_speedup():
    reason = gpu_memory.starved_reference({10: 70 * GIB, 20: 3 * GIB}, [10], [20], retries=4)
    assert reason is not None and "retried 4 times" in reason and "solution's processes held 70.0 GiB" in reason
    assert gpu_memory.starved_reference({10: 70 * GIB, 20: 3 * GIB}, [10], [20], retries=0) is None
    assert gpu_memory.starved_reference({10: 3 * GIB, 20: 3 * GIB}, [10], [20], retries=4) is None  # identical code
    assert gpu_memory.starved_reference({}, [10], [20], retries=4) is None  # nothing known


def counts(retries: int) -> dict[str, int]:
    return {"device_allocs": retries, "device_frees": retries, "retries": retries}


def test_the_judge_rejects_the_speedup_of_a_solution_that_starved_the_reference(monkeypatch):
    judge = judge_seeing(monkeypatch, {10: 75 * GIB, 20: 2 * GIB})
    with pytest.raises(Verdict, match="reference ran short of GPU memory while it was timed") as caught:
        judge.refuse_a_starved_reference({"reference": counts(3), "solution": counts(0)})
    assert caught.value.status == Status.REJECTED
    judge.refuse_a_starved_reference({"reference": None, "solution": None})  # no record: nothing to say
    judge = judge_seeing(monkeypatch, {10: 1 * GIB, 20: 2 * GIB})
    judge.refuse_a_starved_reference({"reference": counts(3), "solution": counts(0)})  # short by itself: a warning only


def test_the_driver_is_not_asked_where_the_reference_never_ran_short(monkeypatch):
    def not_asked():
        raise AssertionError("the driver was asked")

    judge = judge_seeing(monkeypatch, {})
    monkeypatch.setattr(gpu_memory, "held_by_pid", not_asked)
    judge.refuse_a_starved_reference({"reference": counts(0), "solution": counts(9)})
