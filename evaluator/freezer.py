"""Stopping every process of the solution's sandbox while the reference's calls are timed.

Between its own batches a solution has nothing to do, but nothing stops it from doing something:
processes or threads that burn the host's CPUs (or its memory bandwidth) whenever the solution is
not in a call would slow only the reference. Rank 0's judge stops the whole sandbox (SIGSTOP
reaches every thread, and a process cannot ignore it) once every rank's solution batch is over,
and resumes it before the solution's next batch. Every process of the sandbox descends from its
outermost process (orphans are re-parented to the sandbox's init), so none escapes by starting a
session of its own. Torch-free and small: the judge imports it.
"""

from __future__ import annotations

import os
import signal
import time

from evaluator.gpu_lock import GpuLocker
from evaluator.isolation_init import descendants
from evaluator.placement import threads_cpus

# How long to wait for every stopped process to have stopped. A process stops once it leaves the
# kernel; an honest one is never there this long, and one that stays (or cannot be signalled) makes
# the reference's timing indefensible, which the judge reports (Judge.hold_solution).
STOP_WAIT_S = 1.0
# How long queued GPU work may take to finish once the solution's batch is over: the wait is
# outside every clock, and what is still running after it would overlap the reference.
GPU_DRAIN_MS = 2000


STOPPED = (None, "T", "t", "Z", "X")  # stopped, traced-stopped, or gone (None: no such process)


def _state(pid: int) -> str | None:
    """The process's state letter in /proc (T: stopped), or None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0].decode()
    except (OSError, IndexError):
        return None


def _stop_pending(pid: int) -> bool:
    """Whether a SIGSTOP waits to be delivered to the process."""
    bit = 1 << (signal.SIGSTOP - 1)
    try:
        with open(f"/proc/{pid}/status") as f:
            return any(line.startswith(("SigPnd:", "ShdPnd:")) and int(line.split()[1], 16) & bit for line in f)
    except (OSError, ValueError, IndexError):
        return False


def _held(pid: int) -> bool:
    """Stopped or gone; or asleep in the kernel with the stop pending (a vfork parent whose child
    was stopped before it could exec sleeps there until the child goes on): such a process stops
    the moment it leaves the kernel and runs none of its own code before."""
    state = _state(pid)
    return state in STOPPED or (state == "D" and _stop_pending(pid))


class Freezer:
    """`gpu` (on GPU hosts): the lock that drains and holds the processes' GPU work first.
    `placed_cpus`: the CPUs the launcher placed the processes on (evaluator/placement.py), or None."""

    def __init__(self, root_pid: int, gpu: GpuLocker | None = None, placed_cpus: set[int] | None = None):
        self.root = root_pid
        self.gpu = gpu
        self.placed_cpus = placed_cpus
        self.stopped: set[int] = set()

    def _signal(self, pids: set[int], sig: int) -> None:
        for pid in pids:
            try:
                os.kill(pid, sig)
            except (ProcessLookupError, PermissionError):
                pass

    def freeze(self) -> list[str]:
        """Stop every process below the root, its GPU work drained first. Returns those whose GPU
        work could not be drained or that were not seen stopped (or gone) in time, each as
        "pid (why)": empty when all are."""
        unheld = self.gpu.lock(descendants(self.root), GPU_DRAIN_MS) if self.gpu else []
        deadline = time.monotonic() + STOP_WAIT_S
        while True:
            # Rescanned each round: children forked while their parents were being stopped, and a
            # tracer among them that resumed its tracee before it was stopped itself.
            running = {pid for pid in descendants(self.root) | self.stopped if not _held(pid)}
            if not running or time.monotonic() > deadline:
                return unheld + [f"{pid} (state {_state(pid)})" for pid in sorted(running)]
            self._signal(running, signal.SIGSTOP)
            self.stopped |= running
            time.sleep(0.0002)

    def off_placement(self) -> list[str]:
        """The threads (as "pid/tid (CPUs)") that widened their CPUs beyond the placement: a
        solution that could pick a faster CPU than the reference shares would time against it
        unevenly. Narrowing within the placement is fine. Empty when nothing was placed. (The
        sandbox's own processes run within the placement too: evaluator/isolation.py.)"""
        if self.placed_cpus is None:
            return []
        return [f"{pid}/{tid} ({','.join(map(str, sorted(cpus - self.placed_cpus)))})"
                for pid in sorted(descendants(self.root)) for tid, cpus in sorted(threads_cpus(pid).items())
                if not cpus <= self.placed_cpus]

    def thaw(self) -> list[str]:
        """Resume them (and then their GPU work). Returns those that could not be, as freeze."""
        self._signal(self.stopped | descendants(self.root), signal.SIGCONT)
        self.stopped = set()
        return self.gpu.unlock() if self.gpu else []

    def close(self) -> None:
        """Ends the GPU lock's helper (the processes themselves end with their sandbox)."""
        if self.gpu is not None:
            self.gpu.close()
