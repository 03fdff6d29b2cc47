"""The batch-length diagnostic (EvaluationRequest.batch_target_ms, bench/suite_timings.py
--batch-target-ms): on a GPU, how long the faster side's timed batch lasts, for measuring what
the judge's own length (judge.BATCH_TARGET_S) does to its readings on a host whose CPUs change
speed within a pair. A worker's request never carries it (tests/adversarial/test_diagnostic_settings.py)."""

from __future__ import annotations

import pytest

import tasks
from evaluator.launch import EvaluationRequest, evaluate


@pytest.mark.parametrize("ms", [-1.0, 0.1, 251.0])
def test_a_length_out_of_range_is_refused(ms):
    with pytest.raises(ValueError, match="batch_target_ms"):
        EvaluationRequest(problem="allreduce", solution_code="", mode="gpu", batch_target_ms=ms).validate()


@pytest.mark.parametrize("mode, budget_s", [("cpu", 2.0), ("gpu", 0.0)])
def test_a_length_the_judge_would_not_use_is_refused(mode, budget_s):
    """cpu mode and a fixed schedule time iters / 10 calls per batch whatever the length;
    accepting one would give a result whose note claims a length it never had."""
    with pytest.raises(ValueError, match="GPU with a timing budget only"):
        EvaluationRequest(problem="allreduce", solution_code="", mode=mode, timing_budget_s=budget_s,
                          batch_target_ms=5).validate()


@pytest.mark.parametrize("mode", ["gpu", "shared-gpu"])
def test_a_gpu_mode_accepts_a_length_and_zero_keeps_the_judges(mode):
    EvaluationRequest(problem="allreduce", solution_code="", mode=mode, batch_target_ms=5).validate()
    assert EvaluationRequest(problem="allreduce", solution_code="").batch_target_ms == 0


@pytest.mark.gpu
@pytest.mark.skipif(not pytest.importorskip("torch").cuda.is_available(), reason="needs a CUDA GPU")
def test_a_shorter_length_times_fewer_calls_per_batch_and_the_result_says_so():
    code = tasks.reference_source("allgather")

    def shape(**kw) -> dict:
        doc = evaluate(EvaluationRequest(problem="allgather", solution_code=code, world_size=1, mode="gpu",
                                         shapes=["small"], trials=1, **kw))
        assert doc["status"] == "correct", doc["reason"]
        return doc["shapes"][0]

    judges, short = shape(), shape(batch_target_ms=1)
    assert short["timing_run"]["calls_per_batch"] < judges["timing_run"]["calls_per_batch"], (short, judges)
    assert any("sized to last 1 ms" in note for note in short["notes"]), short["notes"]
    assert not any("sized to last" in note for note in judges["notes"]), judges["notes"]
