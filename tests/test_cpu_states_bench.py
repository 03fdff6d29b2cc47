"""bench/cpu_states.py's spell statistics, on made-up visits whose spells are known."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

spec = importlib.util.spec_from_file_location("cpu_states", Path(__file__).resolve().parents[1] / "bench" / "cpu_states.py")
cpu_states = importlib.util.module_from_spec(spec)
spec.loader.exec_module(cpu_states)


def visits(slow_between: list[tuple[float, float]], offset_s: float) -> list[tuple[float, float]]:
    """A CPU visited every 10 ms for 1 s: a 100 us chunk, 300 us inside the given slow spans (s)."""
    runs = []
    for i in range(100):
        at = i * 0.01 + offset_s
        runs.append((at, 300.0 if any(a <= at < b for a, b in slow_between) else 100.0))
    return runs


def test_spells_are_timed_from_the_first_slow_visit_to_the_next_fast_one():
    # CPU 0 slow for 50 ms and for 200 ms, CPU 1 slow for 100 ms: 35 of 200 visits slow.
    found = cpu_states.spells({0: visits([(0.1, 0.15), (0.5, 0.7)], 0.0), 1: visits([(0.3, 0.4)], 0.005)})
    assert found["spells"] == 3
    assert found["slow_share"] == pytest.approx(35 / 200)
    assert found["spell_ms_quartiles"][1] == pytest.approx(100.0)
    assert found["revisit_ms"] == pytest.approx(10.0)
    # each spell's two edges are the only disagreements of one CPU's 99 consecutive pairs
    assert found["same_cpu_agreement"] == pytest.approx(1 - 6 / 198)


def test_cpus_that_change_together_agree_more_than_independent_ones_would():
    together = cpu_states.spells({0: visits([(0.2, 0.6)], 0.0), 1: visits([(0.2, 0.6)], 0.005)})
    assert together["other_cpu_agreement"] > together["independent_agreement"]
    # of 199 chunks back to back, only the two across each edge (CPU 1 visits 5 ms after CPU 0) disagree
    assert together["other_cpu_agreement"] == pytest.approx(1 - 2 / 199)
