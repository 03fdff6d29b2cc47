"""The metrics against cases worked out by hand."""

import pytest

from leaderboards import metrics
from leaderboards.metrics import (
    P_GRID,
    U_GRID,
    Sample,
    estimate,
    failure_breakdown,
    fast_p,
    ks_for,
    pass_at_k,
    pass_rate,
    roof_u,
)


def test_pass_at_k_hand_computed():
    # n=5, c=2, k=2: 1 - C(3,2)/C(5,2) = 1 - 3/10
    assert pass_at_k(5, 2, 2) == pytest.approx(0.7)
    # n=10, c=3, k=1 is c/n
    assert pass_at_k(10, 3, 1) == pytest.approx(0.3)
    # n=4, c=1, k=3: 1 - C(3,3)/C(4,3) = 1 - 1/4
    assert pass_at_k(4, 1, 3) == pytest.approx(0.75)
    assert pass_at_k(3, 0, 2) == 0.0
    assert pass_at_k(3, 2, 2) == 1.0  # n - c < k: every draw of 2 holds a correct one
    with pytest.raises(ValueError):
        pass_at_k(2, 1, 3)


def test_fast_p_one_sample_per_problem():
    # Four problems in scope; three attempted.
    per_problem = {
        "a": [Sample("correct", speedup=2.5, utilization=0.8)],
        "b": [Sample("correct", speedup=0.9, utilization=0.3)],
        "c": [Sample("incorrect")],
    }
    assert fast_p(per_problem, 0, n_problems=4) == pytest.approx(2 / 4)  # fast_0 = correctness rate
    assert fast_p(per_problem, 0.5, n_problems=4) == pytest.approx(2 / 4)
    assert fast_p(per_problem, 1.0, n_problems=4) == pytest.approx(1 / 4)
    assert fast_p(per_problem, 2.5, n_problems=4) == 0.0  # strictly faster than p
    assert roof_u(per_problem, 0.5, n_problems=4) == pytest.approx(1 / 4)
    assert roof_u(per_problem, 0.3, n_problems=4) == pytest.approx(2 / 4)  # at least u
    assert roof_u(per_problem, 0.0, n_problems=4) == pytest.approx(2 / 4)


def test_fast_p_with_samples_is_the_mean_per_problem_estimate():
    per_problem = {
        # 3 samples: 2 correct, 1 of them fast
        "a": [Sample("correct", 1.5), Sample("correct", 0.5), Sample("compile_error")],
        # 3 samples: all correct and fast
        "b": [Sample("correct", 3.0), Sample("correct", 1.2), Sample("correct", 1.1)],
    }
    # k=1: ((1/3) + 1) / 2
    assert fast_p(per_problem, 1.0, n_problems=2) == pytest.approx((1 / 3 + 1) / 2)
    # k=2 on "a": 1 - C(2,2)/C(3,2) = 2/3; on "b": 1
    assert fast_p(per_problem, 1.0, n_problems=2, k=2) == pytest.approx((2 / 3 + 1) / 2)
    # pass@1: (2/3 + 1)/2 ; pass@3: (1 + 1)/2
    assert pass_rate(per_problem, n_problems=2) == pytest.approx((2 / 3 + 1) / 2)
    assert pass_rate(per_problem, n_problems=2, k=3) == 1.0
    # fewer than k samples somewhere: undefined
    assert pass_rate(per_problem, n_problems=2, k=4) is None


def test_estimate_counts_unattempted_problems_as_failures():
    assert estimate([(1, 1)], n_problems=10) == pytest.approx(0.1)
    assert estimate([], n_problems=0) is None
    with pytest.raises(ValueError):
        estimate([(1, 1), (1, 0)], n_problems=1)


def test_ks_follow_the_fewest_samples():
    assert ks_for([(5, 1), (3, 0)]) == [1, 2, 3]
    assert ks_for([]) == []


def test_grids_and_failures():
    assert P_GRID[0] == 0 and P_GRID[-1] == 3.0 and 1.0 in P_GRID
    assert U_GRID[0] == 0 and U_GRID[-1] == 1.0
    counts = failure_breakdown([Sample("timeout"), Sample("compile_error"), Sample("timeout"), Sample("correct")])
    assert counts == {"compile_error": 1, "runtime_error": 0, "incorrect": 0, "timeout": 2, "rejected": 0}


def test_bootstrap_interval_over_problems():
    # Half of 40 problems solved: the interval holds 0.5 and is about +-2 standard errors (0.079) wide.
    counts = [(1, 1)] * 20 + [(1, 0)] * 20
    low, high = metrics.bootstrap_interval(counts, 40)
    assert low < 0.5 < high and 0.3 < low < 0.4 and 0.6 < high < 0.7
    assert metrics.bootstrap_interval(counts, 40) == (low, high)  # seeded: the same figures each time
    # Unattempted problems count as zeros; all or nothing solved leaves no doubt.
    assert metrics.bootstrap_interval([(2, 2)], 4)[0] < 0.25 < metrics.bootstrap_interval([(2, 2)], 4)[1]
    assert metrics.bootstrap_interval([(3, 3)] * 5, 5) == (1.0, 1.0)
    assert metrics.bootstrap_interval([], 0) is None
