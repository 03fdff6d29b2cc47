"""The known-speed solutions, run in-process on CPU tensors with a stand-in reference."""

from __future__ import annotations

import pytest

from evaluator import calibration

torch = pytest.importorskip("torch")

STAND_IN = """
import torch

CALLS = []


def solution(x):
    CALLS.append(x.sum().item())
    return x * 2
"""


def loaded(source: str) -> dict:
    namespace: dict = {}
    exec(compile(source, "<solution>", "exec"), namespace)
    return namespace


def test_the_flushed_repeat_writes_its_buffer_between_the_calls(monkeypatch):
    monkeypatch.setattr(calibration.tasks, "reference_source", lambda problem: STAND_IN)
    ns = loaded(calibration.repeated("stand_in", 3, flush_mib=1))
    x = torch.ones(4)
    assert torch.equal(ns["solution"](x), x * 2)
    assert ns["CALLS"] == [4.0, 4.0, 4.0]
    (flush,) = ns["_flush"]
    assert flush.numel() == 2**20 and flush.device == x.device
    flush.fill_(1)
    ns["solution"](x)
    assert not flush.any()  # written again by the next call


def test_without_a_flush_the_repeat_allocates_nothing(monkeypatch):
    monkeypatch.setattr(calibration.tasks, "reference_source", lambda problem: STAND_IN)
    ns = loaded(calibration.repeated("stand_in", 2))
    ns["solution"](torch.ones(4))
    assert ns["CALLS"] == [4.0, 4.0] and "_flush" not in ns


@pytest.mark.parametrize("times, flush_mib", [(0, 0.0), (2, -1.0)])
def test_impossible_repeats_are_refused(times, flush_mib):
    with pytest.raises(ValueError):
        calibration.repeated("allgather", times, flush_mib=flush_mib)
