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


def test_the_reference_leads_both_orders_by_construction():
    subs = [("reference", "", "waits", 0.0), ("wait 20 us", "", "waits", 20.0),
            ("called 2x", "", "repeats", 2.0), ("called 3x", "", "repeats", 3.0)]
    assert rank_stability.construction_orders(subs, [True] * 4) == {
        "waits": [(0, 0.0), (1, 20.0)], "repeats": [(0, 1.0), (2, 2.0), (3, 3.0)]}
    # A family left with one judged member has no order to compare.
    assert rank_stability.construction_orders(subs, [True, False, True, True]) == {
        "repeats": [(0, 1.0), (2, 2.0), (3, 3.0)]}
