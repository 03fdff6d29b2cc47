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

from evaluator.isolation_init import descendants

ROUNDS = 8  # scans for processes forked while the earlier ones were being stopped
STOP_WAIT_S = 0.2  # how long to wait for every stopped process to have stopped


def _state(pid: int) -> str | None:
    """The process's state letter in /proc (T: stopped), or None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0].decode()
    except (OSError, IndexError):
        return None


class Freezer:
    def __init__(self, root_pid: int):
        self.root = root_pid
        self.stopped: set[int] = set()

    def _signal(self, pids: set[int], sig: int) -> None:
        for pid in pids:
            try:
                os.kill(pid, sig)
            except (ProcessLookupError, PermissionError):
                pass

    def freeze(self) -> bool:
        """Stop every process below the root; True once all are seen stopped (or gone)."""
        for _ in range(ROUNDS):
            new = descendants(self.root) - self.stopped
            if not new:
                break
            self._signal(new, signal.SIGSTOP)
            self.stopped |= new
        deadline = time.monotonic() + STOP_WAIT_S
        waiting = set(self.stopped)
        while waiting:
            waiting = {pid for pid in waiting if _state(pid) not in (None, "T", "t", "Z", "X")}
            if not waiting or time.monotonic() > deadline:
                break
            # Again: a tracer among them may have resumed its tracee before it was stopped itself.
            self._signal(waiting, signal.SIGSTOP)
            time.sleep(0.0002)
        return not waiting

    def thaw(self) -> None:
        self._signal(self.stopped | descendants(self.root), signal.SIGCONT)
        self.stopped = set()
