"""The order of a timed shape's batches: which side's player ran just before each side's batch.
Where both players share a CPU, the one that ran last left its caches warm."""

from collections import Counter

import pytest

import tasks
from evaluator.launch import EvaluationRequest, evaluate
from evaluator.results import BatchOrder, Side
from evaluator.timed_pairs import pair_schedule

NULL = "null"
FAST = {"warmup": 2, "iters": 6, "trials": 1, "shapes": ["small"], "timeout_s": 60, "timing_budget_s": 0}


def steps(pairs: int, batch_order: str) -> list[str]:
    out: list[str] = []
    for i in range(pairs):
        order, null_first = pair_schedule(i, batch_order)
        out += [NULL, *order] if null_first else [*order, NULL]
    return out


def player(step: str) -> str:
    return Side.REFERENCE if step == NULL else step  # null batches run on the reference's player


def warm_share(sequence: list[str]) -> dict[str, float]:
    """Per side, the share of its batches that follow a batch on its own player."""
    after_own, total = Counter(), Counter()
    for before, step in zip(sequence, sequence[1:]):
        if step != NULL:
            total[step] += 1
            after_own[step] += player(before) == step
    return {side: after_own[side] / total[side] for side in total}


@pytest.mark.parametrize("pairs", [10, 40])
def test_each_side_follows_its_own_player_as_often_as_the_other(pairs):
    # The first batch follows the warm-up, not a timed batch, and is left out of the count.
    share = warm_share(steps(pairs, BatchOrder.SYMMETRIC))
    assert share[Side.REFERENCE] == pytest.approx(share[Side.SOLUTION], abs=1.5 / pairs)
    assert share[Side.SOLUTION] == pytest.approx(0.5, abs=1.5 / pairs)


def test_every_pair_has_each_side_once():
    for order_name in BatchOrder:
        for i in range(6):
            order, _null_first = pair_schedule(i, order_name)
            assert sorted(order) == sorted([Side.REFERENCE, Side.SOLUTION])


def test_each_side_goes_first_in_half_the_pairs():
    firsts = Counter(pair_schedule(i)[0][0] for i in range(20))
    assert firsts[Side.REFERENCE] == firsts[Side.SOLUTION] == 10


def test_the_earlier_order_favoured_the_reference():
    # What the default replaced, kept for comparison: the reference followed its own null batch in
    # half its batches, the solution never followed itself.
    share = warm_share(steps(40, BatchOrder.REFERENCE_WARM))
    assert share[Side.SOLUTION] == 0
    assert share[Side.REFERENCE] == pytest.approx(0.5, abs=0.05)


def test_the_earlier_order_still_judges_and_its_result_says_so():
    doc = evaluate(EvaluationRequest(problem="allreduce", solution_code=tasks.reference_source("allreduce"),
                                     world_size=2, mode="cpu", batch_order=BatchOrder.REFERENCE_WARM, **FAST))
    assert doc["status"] == "correct", doc["reason"]
    shape = doc["shapes"][0]
    assert shape["speedup"] > 0
    assert any("reference-warm order" in note for note in shape["notes"]), shape["notes"]


def test_an_unknown_order_is_refused():
    with pytest.raises(ValueError, match="batch_order"):
        EvaluationRequest(problem="allreduce", solution_code="", batch_order="fastest-first").validate()
