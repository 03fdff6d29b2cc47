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


# The wait's length (us) is substituted for WAIT_US. A wait adds its length to every call only if
# it holds both the host and the GPU: a sleep kernel alone runs in the GPU's idle time on a call
# whose host side is the slower one (one H100: a 200 us sleep read 49-84 us there), and a host
# spin alone runs beside the GPU's work on a GPU-bound call. So on a GPU the wrapper waits for the
# call's GPU work to finish, then spins on the host clock: the call then takes the wait longer,
# plus the synchronisation's own cost (microseconds: use waits long against it).
_WAIT = """

import time as _time

import torch as _torch

_reference_solution = solution
_WAIT_NS = int(WAIT_US * 1000)


def solution(*inputs):
    out = _reference_solution(*inputs)
    if _torch.cuda.is_initialized():
        _torch.cuda.synchronize()
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
    """The reference followed by a wait of `wait_us` per call: a spin on the host clock, after
    the call's GPU work (if any) is done."""
    return tasks.reference_source(problem) + _WAIT.replace("WAIT_US", repr(float(wait_us)))
