"""Solutions whose speed relative to a problem's reference is known by construction, for checking
the timer: the reference called several times per call, and the reference followed by a fixed
wait per call. Each is the reference's own source with a wrapper appended, so it runs wherever the
reference runs."""

from __future__ import annotations

import tasks

_REPEATED = """

_reference_solution = solution


def solution(*inputs):
    for _ in range(TIMES - 1):
        _reference_solution(*inputs)
    return _reference_solution(*inputs)
"""


# The wait's length (us) is substituted for WAIT_US. On a GPU the sleep kernel counts clock
# cycles, and the clock moves with load: each call measures its sleep with events and the next
# call corrects the cycle count, so that the sleeps last the wait once the calls run at speed.
_WAIT = """

import time as _time

import torch as _torch

_reference_solution = solution
_WAIT_NS = int(WAIT_US * 1000)
_sleep = {"cycles": 100_000, "events": None}


def _gpu_wait():
    events = _sleep["events"]
    if events is not None and events[1].query():
        measured_ns = events[0].elapsed_time(events[1]) * 1e6
        _sleep["cycles"] = max(1000, int(_sleep["cycles"] * min(2.0, max(0.5, _WAIT_NS / measured_ns))))
    if events is None or events[1].query():
        events = _sleep["events"] = (_torch.cuda.Event(enable_timing=True), _torch.cuda.Event(enable_timing=True))
        events[0].record()
        _torch.cuda._sleep(_sleep["cycles"])
        events[1].record()
    else:
        _torch.cuda._sleep(_sleep["cycles"])


def solution(*inputs):
    out = _reference_solution(*inputs)
    if _torch.cuda.is_initialized():
        _gpu_wait()
    end = _time.perf_counter_ns() + _WAIT_NS
    while _time.perf_counter_ns() < end:
        pass
    return out
"""



def repeated(problem: str, times: int) -> str:
    """The reference, called `times` times per call (true speedup 1 / times; the problem must
    leave its inputs alone)."""
    if times < 1:
        raise ValueError("times must be at least 1")
    return tasks.reference_source(problem) + _REPEATED.replace("TIMES", str(int(times)))


def waiting(problem: str, wait_us: float) -> str:
    """The reference followed by a wait of `wait_us` per call: a spin on the host clock and, on a
    GPU, a sleep kernel of the same length, so that each call takes that much longer whichever of
    host and GPU sets the pace of back-to-back calls."""
    return tasks.reference_source(problem) + _WAIT.replace("WAIT_US", repr(float(wait_us)))
