"""Ending the process trees tests start, without leaving zombies to later tests' leftover checks."""

from __future__ import annotations

import os
import signal
import subprocess
import time

from evaluator.freezer import _state
from evaluator.isolation_init import descendants


def kill_tree(proc: subprocess.Popen, first=lambda pid: False) -> None:
    """Kill every descendant (those `first` picks before the others), then the process, and reap
    them all: once the test process has been a child subreaper (any evaluation makes it one), the
    orphans come to it, and a zombie left there reads as a process left behind to the leftover
    checks of later tests."""
    pids = descendants(proc.pid) | {proc.pid}
    for pid in sorted(pids - {proc.pid}, key=lambda p: not first(p)) + [proc.pid]:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    proc.wait()
    pending, deadline = pids - {proc.pid}, time.monotonic() + 5
    while pending and time.monotonic() < deadline:
        for pid in list(pending):
            try:
                if os.waitpid(pid, os.WNOHANG)[0]:
                    pending.discard(pid)
            except ChildProcessError:  # not ours (yet): gone once its own parent reaped it
                if _state(pid) is None:
                    pending.discard(pid)
        time.sleep(0.005)
