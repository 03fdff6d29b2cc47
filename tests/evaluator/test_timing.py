"""Stall detection in the timed loops."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")

from evaluator.timing import stall_us  # noqa: E402


def test_a_stall_is_far_above_the_median_and_costs_real_time():
    assert stall_us([100.0] * 9 + [5000.0]) == pytest.approx(4900.0)
    assert stall_us([100.0] * 9 + [900.0]) == 0  # 9x the median: a slow call, not a stall
    assert stall_us([10.0] * 9 + [400.0]) == 0  # 40x, but only 0.39 ms lost
    assert stall_us([100.0] * 8 + [5000.0, 2100.0]) == pytest.approx(4900.0 + 2000.0)
