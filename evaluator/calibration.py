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


# The wait's length (us) is substituted for WAIT_US. On a GPU the wait is a sleep kernel alone: a
# host spin beside it (as first written) made the host, with the sleep's bookkeeping, the slower
# side of a call whose reference is GPU-bound, and a 200 us wait read 254-290 us on an H100. The
# sleep kernel counts clock cycles, and the clock moves with load: each sleep is measured with a
# pair of events (kept, not made anew per call), and a later call corrects the cycle count, so
# that the sleeps last the wait once the calls run at speed. Without a GPU the wait is a spin.
_WAIT = """

import time as _time

import torch as _torch

_reference_solution = solution
_WAIT_NS = int(WAIT_US * 1000)
_sleep = {"cycles": 100_000, "events": None, "measuring": False}


def _gpu_wait():
    if _sleep["events"] is None:
        _sleep["events"] = (_torch.cuda.Event(enable_timing=True), _torch.cuda.Event(enable_timing=True))
    start, end = _sleep["events"]
    if _sleep["measuring"] and end.query():
        measured_ns = start.elapsed_time(end) * 1e6
        _sleep["cycles"] = max(1000, int(_sleep["cycles"] * min(2.0, max(0.5, _WAIT_NS / measured_ns))))
        _sleep["measuring"] = False
    if not _sleep["measuring"]:
        start.record()
        _torch.cuda._sleep(_sleep["cycles"])
        end.record()
        _sleep["measuring"] = True
    else:
        _torch.cuda._sleep(_sleep["cycles"])


def solution(*inputs):
    out = _reference_solution(*inputs)
    if _torch.cuda.is_initialized():
        _gpu_wait()
        return out
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
    """The reference followed by a wait of `wait_us` per call: on a GPU a sleep kernel of that
    length (a GPU-bound call takes that much longer; a call whose host side is the slower one
    hides part of it), without one a spin on the host clock."""
    return tasks.reference_source(problem) + _WAIT.replace("WAIT_US", repr(float(wait_us)))
