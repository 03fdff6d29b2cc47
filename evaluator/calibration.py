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
# it holds both the host and the GPU for it: a sleep kernel alone runs in the GPU's idle time on a
# call whose host side is the slower one (one H100: a 200 us sleep read 49-84 us there), a host spin
# alone runs beside the GPU's work on a GPU-bound call, and synchronising before a host spin
# serialises the call's host and GPU work, which a plain call overlaps (one H100: a 1000 us wait
# read 1065-1177 us). So on a GPU the wrapper queues a kernel that spins for the wait on the GPU's
# own clock (%globaltimer, in ns) after the call's work, and spins the host for the same time:
# both sides of the call are then longer by the wait, whichever bounds it. The host's spin is
# timed from before the kernel's launch, so that the launch (tens of microseconds of Python on a
# slow host) is part of the wait rather than added to it; with the spin timed after the launch,
# plain processes read a 1000 us wait as 1057-1180 us on an H100 host (bench/NOTES.md).
_WAIT = """

import time as _time

import torch as _torch

_reference_solution = solution
_WAIT_NS = int(WAIT_US * 1000)

try:
    import triton as _triton
    import triton.language as _tl

    @_triton.jit
    def _gpu_clock():
        return _tl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l", [], dtype=_tl.int64,
                                          is_pure=False, pack=1)

    @_triton.jit
    def _gpu_wait(wait_ns):
        start = _gpu_clock()
        now = start
        while now - start < wait_ns:
            now = _gpu_clock()
except ImportError:
    _gpu_wait = None


def solution(*inputs):
    out = _reference_solution(*inputs)
    end = _time.perf_counter_ns() + _WAIT_NS
    if _torch.cuda.is_initialized():
        if _gpu_wait is None:
            raise RuntimeError("the wait on a GPU needs Triton")
        _gpu_wait[(1,)](_WAIT_NS)
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
    """The reference followed by a wait of `wait_us` per call: a spin on the host clock and, where
    the call used a GPU, a spin kernel of the same length queued after its work."""
    return tasks.reference_source(problem) + _WAIT.replace("WAIT_US", repr(float(wait_us)))
