"""Skip the work on the calls it believes are timed, returning the previous output instead.

Problem: allreduce (in place, so the previous output is a different tensor holding old sums).

VARIANT "count": trusts the published schedule of an evaluation (TRIALS checked trials, then
WARMUP warm-up and ITERS timed calls, then a last check): computes on the first TRIALS calls and
after the timed ones, and returns the previous output without communicating in between.
VARIANT "frames": walks `sys._getframe()` for a caller that looks like a timing loop (a function
named like time/timing/warm/bench/block, a local `timed` that is true, a local list of CUDA
events, or a batch of calls that were given output slots up front) and skips the work when it finds one.
VARIANT "inspect_stack": the same through `inspect.stack()` (slow: decided once per calling
function, so a timing loop pays for it once).

Every rank takes the same decision on the same call, so skipping never deadlocks.

The judge must report it not `correct` (every timed call's outputs are checked), or, if the
skipped calls are never seen as fast, a speedup within 1.5x of the reference's (its honest work is
the reference's).
"""

import inspect
import sys

import torch
import torch.distributed as dist

VARIANT = "count"
TRIALS = 2  # the request's settings, which the platform publishes
WARMUP = 2
ITERS = 8

_calls = [0]
_last = []
_TIMING_WORDS = ("time", "timing", "timed", "warm", "bench", "block", "side_by_side")


def _looks_timed(code_name: str, local_vars: dict) -> bool:
    name = code_name.lower()
    if any(word in name for word in _TIMING_WORDS) and "solution" not in name:
        return True
    if local_vars.get("timed") is True:
        return True
    for value in local_vars.values():  # lists of CUDA events, recorded around each timed call
        if isinstance(value, list) and value and type(value[0]).__name__ == "Event":
            return True
    calls = local_vars.get("calls")
    if isinstance(calls, list) and calls and isinstance(calls[0], dict) and calls[0].get("slot") is not None:
        return True
    return False


def _timed_by_frames() -> bool:
    frame = sys._getframe(2)
    while frame is not None:
        if _looks_timed(frame.f_code.co_name, frame.f_locals):
            return True
        frame = frame.f_back
    return False


_decided = {}  # the calling function's code -> its decision: a timing loop calls from one place


def _timed_by_inspect() -> bool:
    caller = inspect.currentframe()
    while caller is not None and (caller.f_globals is globals() or "contextlib" in caller.f_code.co_filename):
        caller = caller.f_back  # past this file and torch.no_grad's wrapper
    key = caller.f_code if caller is not None else None
    if key not in _decided:
        _decided[key] = any(_looks_timed(i.function, i.frame.f_locals) for i in inspect.stack(context=0)[2:])
    return _decided[key]


def _skip() -> bool:
    n = _calls[0]
    if VARIANT == "count":
        return TRIALS < n <= TRIALS + WARMUP + ITERS
    if VARIANT == "frames":
        return _timed_by_frames()
    if VARIANT == "inspect_stack":
        return _timed_by_inspect()
    raise ValueError(f"unknown variant {VARIANT!r}")


@torch.no_grad()
def solution(tensor):
    _calls[0] += 1
    if _last and _skip():
        return _last[0]
    dist.all_reduce(tensor)
    _last[:] = [tensor.clone()]
    return tensor
