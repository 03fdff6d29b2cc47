"""Timed loops inside a rank. CUDA events per iteration and no host synchronisation inside a block;
the reference and the solution alternate in rounds so that drift (clocks, neighbours) hits both."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

import torch

# A block whose wall time exceeds the events' sum by this much ran work the events did not see
# (a side stream, or work deferred past the end event): its wall time is used instead.
WALL_SLACK_FACTOR = 1.5
WALL_SLACK_US = 1000.0


# An iteration this many times its side's median, and this much above it, is a stall (the host
# descheduled, a page fault): rare and random, yet one of them can double a 100-iteration mean.
STALL_FACTOR = 10.0
STALL_MIN_US = 500.0


def stall_us(samples_us: list[float]) -> float:
    """Time these iterations spent in stalls, beyond the median."""
    median = statistics.median(samples_us)
    return sum(v - median for v in samples_us if v > STALL_FACTOR * median and v > median + STALL_MIN_US)


def _block_gpu(fn: Callable, sets: list[tuple], first: int, n: int) -> tuple[list[float], float]:
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
    wall0 = time.perf_counter()
    for i in range(n):
        starts[i].record()
        fn(*sets[(first + i) % len(sets)])
        ends[i].record()
    torch.cuda.synchronize()
    wall_us = (time.perf_counter() - wall0) * 1e6
    return [s.elapsed_time(e) * 1e3 for s, e in zip(starts, ends)], wall_us


def _block_cpu(fn: Callable, sets: list[tuple], first: int, n: int) -> tuple[list[float], float]:
    samples = []
    wall0 = time.perf_counter()
    for i in range(n):
        t0 = time.perf_counter_ns()
        fn(*sets[(first + i) % len(sets)])
        samples.append((time.perf_counter_ns() - t0) / 1e3)
    return samples, (time.perf_counter() - wall0) * 1e6


def warm_up(fn: Callable, sets: list[tuple], n: int, on_gpu: bool) -> None:
    for i in range(n):
        fn(*sets[i % len(sets)])
    if on_gpu:
        torch.cuda.synchronize()


def side_by_side(
    sides: dict[str, Callable],
    sets: list[tuple],
    iters: int,
    rounds: int,
    on_gpu: bool,
    align: Callable[[], None],
) -> dict[str, dict[str, Any]]:
    """Time every side `iters` times over `rounds` rounds, alternating which side goes first.
    Iteration i of a side uses input set i (mod len(sets)). `align` synchronises the device and
    barriers all ranks before each block. Returns per side: samples (us), wall check notes."""
    block = _block_gpu if on_gpu else _block_cpu
    names = list(sides)
    out = {name: {"samples_us": [], "wall_us": 0.0} for name in names}
    rounds = max(1, min(rounds, iters))
    done = 0
    for r in range(rounds):
        n = (iters - done) // (rounds - r)
        order = names if r % 2 == 0 else names[::-1]
        for name in order:
            align()
            samples, wall_us = block(sides[name], sets, done, n)
            out[name]["samples_us"].extend(samples)
            out[name]["wall_us"] += wall_us
        done += n
    for name in names:
        side = out[name]
        event_total = sum(side["samples_us"])
        side["notes"] = []
        if on_gpu and side["wall_us"] > WALL_SLACK_FACTOR * event_total + WALL_SLACK_US:
            per_iter = side["wall_us"] / iters
            side["notes"].append(
                f"wall time per iteration ({per_iter:.1f} us) far exceeds the CUDA events' mean "
                f"({event_total / iters:.1f} us): work outside the timed stream; wall time used"
            )
            side["samples_us"] = [per_iter] * iters
    return out
