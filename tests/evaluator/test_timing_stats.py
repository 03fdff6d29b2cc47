"""The timing statistics: order-statistic intervals of medians, the paired speedup, and the rule
that ends a shape's timing."""

import math
import random

import pytest

from evaluator import timing_stats
from evaluator.timing_stats import TimingStop, median_interval, paired_ratio, stop_reason


def test_the_interval_of_ten_samples_drops_the_extremes():
    low, high, coverage = median_interval([float(v) for v in range(10, 0, -1)])
    # P(B <= 1) = 11/1024 for B ~ Binomial(10, 1/2): [x_(2), x_(9)] covers 97.9%; [x_(3), x_(8)] only 89%.
    assert (low, high) == (2.0, 9.0)
    assert coverage == pytest.approx(1 - 2 * 11 / 1024)


def test_too_few_samples_give_their_range_and_say_how_little_it_covers():
    low, high, coverage = median_interval([3.0, 1.0, 2.0])
    assert (low, high) == (1.0, 3.0)
    assert coverage == pytest.approx(0.75)


@pytest.mark.parametrize("n", [10, 25, 60])
def test_the_interval_covers_the_true_median_as_often_as_it_claims(n):
    """Log-normal samples (a long right tail, like batch times): the true median is 1.0."""
    rng = random.Random(1234 + n)
    trials, covered = 2000, 0
    for _ in range(trials):
        low, high, _coverage = median_interval([math.exp(rng.gauss(0.0, 0.3)) for _ in range(n)])
        covered += low <= 1.0 <= high
    assert covered / trials >= 0.93  # 95% claimed; 2000 trials put the sampling error near 0.5%


def test_the_speedup_is_the_median_of_paired_ratios_with_its_interval():
    reference = [200.0, 210.0, 190.0, 205.0, 195.0, 400.0, 200.0, 202.0, 198.0, 201.0]  # one stalled batch
    solution = [100.0, 105.0, 95.0, 102.5, 97.5, 100.0, 100.0, 101.0, 99.0, 100.5]
    ratio = paired_ratio(reference, solution)
    assert ratio.value == pytest.approx(2.0)
    assert ratio.low <= 2.0 <= ratio.high and ratio.high < 4.0  # the stall does not reach the interval
    assert ratio.pairs == 10


def test_drift_that_scales_both_sides_of_a_pair_cancels():
    drift = [1.0 + 0.05 * i for i in range(12)]  # the machine slows down 55% over the run
    ratio = paired_ratio([300.0 * d for d in drift], [100.0 * d for d in drift])
    assert (ratio.value, ratio.low, ratio.high) == pytest.approx((3.0, 3.0, 3.0))
    assert ratio.half_width == pytest.approx(0.0, abs=1e-12)


def test_pair_spread_is_the_ratios_interquartile_range_over_their_median():
    drift = [1.0 + 0.05 * i for i in range(12)]
    assert timing_stats.pair_spread([300.0 * d for d in drift], [100.0 * d for d in drift]) == pytest.approx(0.0)
    # ratios 1, 2, 3, 4, 5: quartiles 1.5 and 4.5 (the exclusive method), median 3
    assert timing_stats.pair_spread([1.0, 2.0, 3.0, 4.0, 5.0], [1.0] * 5) == pytest.approx(1.0)
    assert timing_stats.pair_spread([4.0, 2.0, 5.0, 1.0, 3.0], [1.0] * 5) == pytest.approx(1.0)  # any order
    assert math.isnan(timing_stats.pair_spread([1.0], [1.0]))
    with pytest.raises(ValueError):
        timing_stats.pair_spread([1.0, 2.0], [1.0])


def test_a_solution_below_the_protocols_resolution_has_no_speedup():
    assert paired_ratio([10.0] * 10, [0.0] * 10) is None
    assert paired_ratio([], []) is None
    with pytest.raises(ValueError):
        paired_ratio([1.0], [1.0, 2.0])


def _ratio(value, low, high):
    return timing_stats.Ratio(value, low, high, 0.95, 10)


def test_timing_stops_when_the_interval_is_narrow_the_budget_is_spent_or_the_pairs_run_out():
    narrow, wide = _ratio(1.0, 0.995, 1.008), _ratio(1.0, 0.9, 1.1)
    assert stop_reason(narrow, pairs=9, elapsed_s=99, budget_s=2, max_pairs=400, min_pairs=10) is None
    assert stop_reason(narrow, pairs=10, elapsed_s=0.1, budget_s=2, max_pairs=400) == TimingStop.CONVERGED
    assert stop_reason(wide, pairs=10, elapsed_s=0.1, budget_s=2, max_pairs=400) is None
    assert stop_reason(wide, pairs=10, elapsed_s=2.1, budget_s=2, max_pairs=400) == TimingStop.BUDGET
    assert stop_reason(wide, pairs=400, elapsed_s=0.1, budget_s=2, max_pairs=400) == TimingStop.LIMIT
    assert stop_reason(None, pairs=10, elapsed_s=0.1, budget_s=0, max_pairs=400) == TimingStop.FIXED
    assert stop_reason(None, pairs=10, elapsed_s=2.1, budget_s=2, max_pairs=400) == TimingStop.BUDGET
