"""Robust timing statistics: medians with distribution-free confidence intervals, and the rule that
ends a shape's timing. Pure Python: the judges apply the stopping rule while they time, and the
parent computes the document's numbers, with this one module.

Why medians and order statistics: a batch time is the judge's clock over a batch of calls, and its
distribution has a long right tail (a stalled host, a preempted core) and no known shape. The
median ignores the tail, and the interval [x_(k), x_(n+1-k)] of the sorted samples covers the true
median with probability 1 - 2 P(B <= k-1), B ~ Binomial(n, 1/2), whatever the distribution, as long
as the samples are independent draws from it.

Why the speedup is the median of paired ratios: the judge runs the two sides' batches of one pair
back to back on the same inputs, alternating which goes first, so a drift of the machine (clocks,
temperature, other tenants) scales both members of a pair and cancels in their ratio; the median
of the ratios inherits the order-statistic interval.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum


def slowest_per_batch(per_rank_samples_us: Sequence[Sequence[float]]) -> list[float]:
    """The problem's time in each batch: its slowest rank's."""
    return [max(batch) for batch in zip(*per_rank_samples_us)]


class TimingStop(StrEnum):
    """Why a shape's timing ended."""

    CONVERGED = "converged"  # the speedup's interval reached its target width
    BUDGET = "budget"  # the shape's time budget ran out first
    LIMIT = "limit"  # the most pairs a shape may take
    FIXED = "fixed"  # no time budget: the requested calls only


CONFIDENCE = 0.95
MIN_PAIRS = 10  # the timed pairs every shape gets before the stopping rule is asked
TARGET_HALF_WIDTH = 0.01  # stop once the speedup's interval is within +-1% of it
MAX_PAIRS = 400  # the most timed pairs of one shape, whatever its budget


def _binomial_cdf_half(k: int, n: int) -> float:
    """P(B <= k) for B ~ Binomial(n, 1/2)."""
    if k < 0:
        return 0.0
    return sum(math.comb(n, i) for i in range(min(k, n) + 1)) / 2.0**n


def median(values: Sequence[float]) -> float:
    s = sorted(values)
    n = len(s)
    if n == 0:
        raise ValueError("no samples")
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


def median_interval(values: Sequence[float], confidence: float = CONFIDENCE) -> tuple[float, float, float]:
    """(low, high, coverage): the narrowest order-statistic interval around the median whose
    coverage is at least `confidence`; with too few samples for that (under 6 at 95%), the
    samples' whole range and the coverage it has."""
    s = sorted(values)
    n = len(s)
    if n == 0:
        raise ValueError("no samples")
    k = 1
    while k < n + 1 - k and 1 - 2 * _binomial_cdf_half(k, n) >= confidence:
        k += 1  # x_(k+1) .. x_(n-k) still covers
    return s[k - 1], s[n - k], 1 - 2 * _binomial_cdf_half(k - 1, n)


@dataclass(frozen=True)
class Ratio:
    """The speedup of one shape: the median over timed pairs of reference time / solution time."""

    value: float
    low: float
    high: float
    coverage: float
    pairs: int

    @property
    def half_width(self) -> float:
        """The interval's larger side relative to the value (0.01: within +-1%)."""
        if not (self.value > 0 and math.isfinite(self.value)):
            return math.inf
        return max(self.value - self.low, self.high - self.value) / self.value


def paired_ratio(reference: Sequence[float], solution: Sequence[float]) -> Ratio | None:
    """reference[i] / solution[i] over pairs; None when no pair has a measurable solution time
    (at or below the protocol's fixed cost: too fast for this protocol to tell)."""
    if len(reference) != len(solution):
        raise ValueError("reference and solution need the same number of batches")
    ratios = [r / s if s > 0 else math.inf for r, s in zip(reference, solution)]
    if not ratios:
        return None
    value = median(ratios)
    if not math.isfinite(value):
        return None
    low, high, coverage = median_interval(ratios)
    return Ratio(value, low, high, coverage, len(ratios))


def pair_spread(reference: Sequence[float], solution: Sequence[float]) -> float:
    """How far the pairs' ratios (reference / solution) scatter: their interquartile range over
    their median. Two stopwatches on one host compare their own noise by it, apart from where
    their medians lie (bench/ruler_check.py)."""
    ratios = [r / s for r, s in zip(reference, solution, strict=True) if s > 0]
    if len(ratios) < 2:
        return math.nan
    low, _, high = statistics.quantiles(ratios, n=4)
    return (high - low) / median(ratios)


def stop_reason(ratio: Ratio | None, pairs: int, elapsed_s: float, budget_s: float, max_pairs: int,
                min_pairs: int = MIN_PAIRS, target: float = TARGET_HALF_WIDTH) -> TimingStop | None:
    """Why to stop timing now, or None to time another pair. Every judge calls it with the same
    gathered samples, so all ranks stop after the same pair."""
    if pairs < min_pairs:
        return None
    if budget_s <= 0:
        return TimingStop.FIXED
    if ratio is not None and ratio.half_width <= target:
        return TimingStop.CONVERGED
    if pairs >= max_pairs:
        return TimingStop.LIMIT
    if elapsed_s >= budget_s:
        return TimingStop.BUDGET
    return None
