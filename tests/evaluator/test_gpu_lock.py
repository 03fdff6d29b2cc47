"""The GPU lock drains a process's queued kernels before the reference is timed, and the judge
never waits on it past a deadline. The GPU tests need a CUDA GPU and a driver with the checkpoint
lock; the rest run anywhere."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from evaluator import gpu_lock
from evaluator.freezer import Freezer, _state
from evaluator.gpu_lock import GpuLocker, LockUnavailable
from evaluator.isolation_init import descendants


def _driver_present() -> bool:
    try:
        gpu_lock._driver()
    except (OSError, LockUnavailable):
        return False
    return True


def test_a_host_without_the_lock_says_why():
    if _driver_present():
        pytest.skip("this host has the lock")
    with pytest.raises(LockUnavailable):
        GpuLocker()


class RecordingLock:
    """Stands in for GpuLocker: records each process's state when it is locked and unlocked."""

    def __init__(self):
        self.seen: list[tuple[str, dict]] = []
        self.pids: set[int] = set()

    def lock(self, pids, timeout_ms):
        self.pids = set(pids)
        self.seen.append(("lock", {pid: _state(pid) for pid in pids}))
        return []

    def unlock(self):
        self.seen.append(("unlock", {pid: _state(pid) for pid in self.pids}))
        return ["42 (unlock failed (1))"]


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="needs /proc")
def test_the_freezer_locks_before_it_stops_and_resumes_before_it_unlocks():
    """The lock needs its target running (a stopped one never answers); an unlock's failure comes
    back from thaw."""
    proc = subprocess.Popen([sys.executable, "-c", "import os, time\nif os.fork() == 0:\n    time.sleep(60)\ntime.sleep(60)"])
    try:
        deadline = time.monotonic() + 5
        while not (children := descendants(proc.pid)) and time.monotonic() < deadline:
            time.sleep(0.01)
        lock = RecordingLock()
        freezer = Freezer(proc.pid, lock)
        assert freezer.freeze() == []
        assert lock.seen[0][0] == "lock" and set(lock.seen[0][1]) == children
        assert all(state != "T" for state in lock.seen[0][1].values())
        assert all(_state(pid) == "T" for pid in children)
        assert freezer.thaw() == ["42 (unlock failed (1))"]
        assert lock.seen[1][0] == "unlock" and set(lock.seen[1][1]) == children
        assert all(state != "T" for state in lock.seen[1][1].values())  # resumed before unlocked
    finally:
        for pid in descendants(proc.pid):
            os.kill(pid, signal.SIGKILL)
        proc.kill()
        proc.wait()


# A process that queues SECONDS of GPU work and says so, then idles.
QUEUED = """
import sys, time, torch
start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
torch.cuda._sleep(1000); start.record(); torch.cuda._sleep(20_000_000); end.record(); end.synchronize()
cycles_per_us = 20_000_000 / (start.elapsed_time(end) * 1e3)
torch.cuda._sleep(int(float(sys.argv[1]) * 1e6 * cycles_per_us))
print("queued", flush=True)
time.sleep(60)
"""


needs_lock = pytest.mark.skipif(not _driver_present(), reason="needs a CUDA driver with the checkpoint lock")


@pytest.fixture
def queued():
    procs = []

    def start(seconds: float) -> subprocess.Popen:
        proc = subprocess.Popen([sys.executable, "-c", QUEUED, str(seconds)], stdout=subprocess.PIPE)
        procs.append(proc)
        assert proc.stdout.readline().strip() == b"queued"
        return proc

    yield start
    for proc in procs:
        os.kill(proc.pid, signal.SIGCONT)
        proc.kill()
        proc.wait()


@pytest.mark.gpu
@needs_lock
def test_the_lock_waits_for_queued_work_and_names_what_outlasts_it(queued):
    locker = GpuLocker()
    try:
        proc = queued(1.5)
        t0 = time.monotonic()
        assert locker.lock({proc.pid}, 300) == [f"{proc.pid} (its GPU work was still running after 300 ms)"]
        assert locker.lock({proc.pid}, 5000) == []  # the rest of the 1.5 s, then locked
        waited = time.monotonic() - t0
        assert 1.0 < waited < 3.0, waited
        assert locker.unlock() == []
        quiet, plain = queued(0.0), subprocess.Popen(["sleep", "60"])
        t0 = time.monotonic()
        assert locker.lock({quiet.pid, plain.pid}, 1000) == []  # `sleep` holds no CUDA context: skipped
        assert locker.locked == {quiet.pid}
        assert time.monotonic() - t0 < 0.5
        assert locker.unlock() == []
        plain.kill()
        plain.wait()
    finally:
        locker.close()


@pytest.mark.gpu
@needs_lock
def test_a_lock_that_never_answers_is_abandoned_at_the_deadline(queued):
    """On a stopped process the driver's lock does not return: the judge kills its helper."""
    locker = GpuLocker()
    proc = queued(0.0)
    os.kill(proc.pid, signal.SIGSTOP)
    t0 = time.monotonic()
    assert locker.lock({proc.pid}, 200) == [f"{proc.pid} (the GPU lock did not answer)"]
    assert time.monotonic() - t0 < 10
    assert locker.proc.poll() is not None
