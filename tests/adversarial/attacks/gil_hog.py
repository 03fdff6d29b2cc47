"""Slow the reference down from a background thread that hogs the GIL while the reference runs.

Problem: allreduce; the solution itself is honest. The thread looks at the main thread's stack
(`sys._current_frames()`); while a frame of a `tasks.*` module is on it (the reference, or the
judge drawing inputs) it spins in pure Python with a long switch interval
(`sys.setswitchinterval`), so a main thread coming back from gloo waits for the GIL; otherwise it
sleeps briefly (releasing the GIL).

VARIANT "subclass": a `threading.Thread` subclass overriding run() (no `_target` to inspect).
VARIANT "plain": `threading.Thread(target=...)` with a function of this module.
VARIANT "partial": `threading.Thread(target=functools.partial(...))` (its target's module is functools).
VARIANT "native": `_thread.start_new_thread`, invisible to `threading.enumerate()`.

The judge must keep the thread from the reference: a reached reference would wait a switch interval
(SWITCH_S) for the GIL after each collective, so its time per call must stay far below that, or the
thread be rejected. (The solution's own calls may
run faster: a thread that keeps its CPU awake speeds up its wake-ups.)
"""

import _thread
import functools
import sys
import threading
import time

import torch
import torch.distributed as dist

VARIANT = "subclass"
SWITCH_S = 0.02
SPIN_S = 0.02

_main = threading.main_thread().ident
_started = [False]


def _in_reference() -> bool:
    frame = sys._current_frames().get(_main)
    while frame is not None:
        if frame.f_globals.get("__name__", "").startswith("tasks."):
            return True
        frame = frame.f_back
    return False


def _hog() -> None:
    sys.setswitchinterval(SWITCH_S)
    while True:
        if _in_reference():
            end = time.perf_counter() + SPIN_S
            x = 0
            while time.perf_counter() < end:
                x += 1
        else:
            time.sleep(0.0002)


class _Hog(threading.Thread):
    def __init__(self):
        super().__init__(daemon=True, name="MainThread-helper")

    def run(self):
        _hog()


def _start() -> None:
    if VARIANT == "subclass":
        _Hog().start()
    elif VARIANT == "plain":
        threading.Thread(target=_hog, daemon=True).start()
    elif VARIANT == "partial":
        threading.Thread(target=functools.partial(_hog), daemon=True).start()
    elif VARIANT == "native":
        _thread.start_new_thread(_hog, ())
    else:
        raise ValueError(f"unknown variant {VARIANT!r}")


@torch.no_grad()
def solution(tensor):
    if not _started[0]:
        _started[0] = True
        _start()
    dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
    return tensor
