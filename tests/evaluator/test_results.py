"""The result document: statistics, summaries and validation of documents from workers."""

import copy

import pytest

from evaluator import results

DOC = {
    "schema": "pkb.result/1", "status": "correct", "reason": "", "mode": "gpu", "world_size": 4,
    "shapes": [{"name": "default", "speedup": 1.5, "solution": {"time_us": 10.0}, "reference": {"time_us": 15.0}}],
    "summary": {"correct": True, "speedup": 1.5, "utilization": 0.4, "solution_us": 10.0, "reference_us": 15.0},
}


def test_stats():
    s = results.stats([1.0, 2.0, 3.0, 10.0])
    assert s == {"mean_us": 4.0, "median_us": 2.5, "std_us": pytest.approx(3.5355, rel=1e-4), "min_us": 1.0,
                 "max_us": 10.0, "iterations": 4, "batches": 4}
    assert results.stats([1.0, 2.0], calls_per_sample=10)["iterations"] == 20


def test_problem_time_is_the_median_batch_of_the_slowest_rank():
    t = results.timing([[1.0, 1.0], [3.0, 5.0], [2.0, 2.0]])
    assert t["slowest_rank"] == 1 and t["time_us"] == 4.0
    # Batch by batch the slowest rank decides; one stalled batch does not move the median.
    t = results.timing([[1.0, 9.0, 1.0], [2.0, 1.0, 2.0]])
    assert t["time_us"] == 2.0


def test_summary_is_geometric_mean_over_shapes():
    shapes = [{"speedup": 2.0, "roofline": {"utilization": 0.5}, "default": True, "solution": {"time_us": 3.0}},
              {"speedup": 8.0, "roofline": {"utilization": 0.125}}]
    s = results.summarize(shapes, "correct")
    assert s["speedup"] == pytest.approx(4.0) and s["utilization"] == pytest.approx(0.25) and s["solution_us"] == 3.0
    assert results.summarize(shapes, "incorrect")["speedup"] is None


def test_validate_accepts_a_good_document():
    assert results.validate(copy.deepcopy(DOC))["status"] == "correct"


@pytest.mark.parametrize(
    "mutate",
    [
        lambda d: d.update(schema="other/9"),
        lambda d: d.update(status="great"),
        lambda d: d.update(mode="tpu"),
        lambda d: d["summary"].update(correct=False),
        lambda d: d["summary"].update(speedup=float("nan")),
        lambda d: d["shapes"][0].update(speedup="fast"),
        lambda d: d.update(shapes="none"),
    ],
)
def test_validate_refuses_bad_documents(mutate):
    doc = copy.deepcopy(DOC)
    mutate(doc)
    with pytest.raises(results.InvalidResult):
        results.validate(doc)


def test_log_tail_is_cut():
    text = "x" * (results.LOG_TAIL_CHARS + 50)
    assert results.tail(text).startswith("[... 50 characters cut ...]")
