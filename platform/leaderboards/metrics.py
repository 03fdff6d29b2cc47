"""Model-comparison metrics, pure Python.

- fast_p: fraction of problems whose solution is correct and more than p times faster than the
  reference (fast_0 is the correctness rate). roof_u: fraction correct and at >= u of the roofline.
- With n samples per problem, every metric is the unbiased pass@k estimator of Chen et al. (2021),
  1 - C(n-c, k) / C(n, k), averaged over problems, where c counts the samples that meet the
  metric's condition: pass@k counts correct samples, fast_p@k fast ones. At k = 1 it is c / n.
- Problems without samples count as failures: the denominator is every problem in scope.
- Uncertainty: a 95% percentile-bootstrap interval over problems (`bootstrap_interval`): the
  problems in scope drawn with replacement, the metric recomputed per draw. It says how much the
  figure owes to which problems happen to be in the suite, and for pass@1 also to the samples'
  luck. Draws are seeded, so a page shows the same interval for the same results.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from math import comb

import numpy as np

from evaluator.results import FailureKind, Status

P_GRID = tuple(round(0.1 * i, 1) for i in range(31))  # 0.0 .. 3.0
U_GRID = tuple(round(0.05 * i, 2) for i in range(21))  # 0.00 .. 1.00
K_CHOICES = (1, 2, 3, 5, 10, 20, 50, 100)


@dataclass(frozen=True)
class Sample:
    """One sample's judged outcome on one hardware."""

    status: Status
    speedup: float | None = None
    utilization: float | None = None

    @property
    def correct(self) -> bool:
        return self.status == Status.CORRECT


def is_fast(sample: Sample, p: float) -> bool:
    if not sample.correct:
        return False
    return p <= 0 or (sample.speedup is not None and sample.speedup > p)


def reaches_roof(sample: Sample, u: float) -> bool:
    if not sample.correct:
        return False
    return u <= 0 or (sample.utilization is not None and sample.utilization >= u)


def pass_at_k(n: int, c: int, k: int) -> float:
    """Probability that at least one of k samples drawn without replacement from n, c of them good, is good."""
    if not 0 <= c <= n:
        raise ValueError(f"need 0 <= c <= n, got n={n}, c={c}")
    if k < 1 or k > n:
        raise ValueError(f"need 1 <= k <= n, got n={n}, k={k}")
    if n - c < k:
        return 1.0
    return 1.0 - comb(n - c, k) / comb(n, k)


def estimate(counts: Iterable[tuple[int, int]], n_problems: int, k: int = 1) -> float | None:
    """Mean over n_problems of pass@k(n, c, k), given (n, c) for each attempted problem. None when
    some attempted problem has fewer than k samples (the estimator is undefined) or nothing is in scope."""
    counts = list(counts)
    if n_problems <= 0 or any(n < k for n, _ in counts):
        return None
    if len(counts) > n_problems:
        raise ValueError("more attempted problems than problems in scope")
    if k == 1:  # pass@1 is c / n; the comparison pages evaluate thousands of these
        return sum(c / n for n, c in counts) / n_problems
    return sum(pass_at_k(n, c, k) for n, c in counts) / n_problems


BOOTSTRAP_DRAWS = 400


def bootstrap_interval(counts: Iterable[tuple[int, int]], n_problems: int, draws: int = BOOTSTRAP_DRAWS,
                       seed: int = 0) -> tuple[float, float] | None:
    """95% percentile-bootstrap interval of the pass@1 estimate (mean of c / n over n_problems, the
    unattempted ones 0), resampling the problems in scope. A draw's sum depends only on how many
    times each distinct value is drawn: one multinomial per draw."""
    values = Counter(c / n for n, c in counts if n)
    if n_problems <= 0 or sum(values.values()) > n_problems:
        return None
    values[0.0] += n_problems - sum(values.values())
    distinct = np.array(list(values))
    weights = np.array(list(values.values()), dtype=float) / n_problems
    picks = np.random.default_rng(seed).multinomial(n_problems, weights, size=draws)
    means = np.sort(picks @ distinct / n_problems)
    return float(means[int(0.025 * (draws - 1))]), float(means[int(round(0.975 * (draws - 1)))])


def max_k(counts: Iterable[tuple[int, int]]) -> int:
    """The largest k every attempted problem supports (the fewest samples on any problem)."""
    return min((n for n, _ in counts), default=0)


def ks_for(counts) -> list[int]:
    top = max_k(counts)
    return [k for k in K_CHOICES if k <= top]


# Sample-level entry points (used by tests and small in-memory comparisons).


def _counts(per_problem: Mapping[str, list[Sample]], test) -> list[tuple[int, int]]:
    return [(len(samples), sum(1 for s in samples if test(s))) for samples in per_problem.values() if samples]


def fast_p(per_problem: Mapping[str, list[Sample]], p: float, n_problems: int, k: int = 1) -> float | None:
    return estimate(_counts(per_problem, lambda s: is_fast(s, p)), n_problems, k)


def roof_u(per_problem: Mapping[str, list[Sample]], u: float, n_problems: int, k: int = 1) -> float | None:
    return estimate(_counts(per_problem, lambda s: reaches_roof(s, u)), n_problems, k)


def pass_rate(per_problem: Mapping[str, list[Sample]], n_problems: int, k: int = 1) -> float | None:
    return estimate(_counts(per_problem, lambda s: s.correct), n_problems, k)


def failure_breakdown(samples: Iterable[Sample]) -> dict[str, int]:
    counted = Counter(s.status for s in samples)
    return {kind.value: counted.get(kind, 0) for kind in FailureKind}
