"""bench/rank_stability.py's Kendall tau, on orders whose tau is known."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

spec = importlib.util.spec_from_file_location("rank_stability", Path(__file__).resolve().parents[1] / "bench" / "rank_stability.py")
rank_stability = importlib.util.module_from_spec(spec)
spec.loader.exec_module(rank_stability)


def test_the_same_order_scores_one_and_the_reversed_order_minus_one():
    assert rank_stability.kendall_tau([5, 4, 3, 2, 1], [0.9, 0.8, 0.5, 0.3, 0.1]) == 1.0
    assert rank_stability.kendall_tau([5, 4, 3, 2, 1], [1, 2, 3, 4, 5]) == -1.0


def test_one_swapped_neighbour_of_five_costs_two_tenths():
    # 10 pairs, one discordant: (9 - 1) / 10
    assert rank_stability.kendall_tau([5, 4, 3, 2, 1], [5, 3, 4, 2, 1]) == pytest.approx(0.8)


def test_one_item_has_no_pairs():
    with pytest.raises(ValueError):
        rank_stability.kendall_tau([1], [1])
