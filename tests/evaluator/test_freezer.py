"""The freezer stops every process below a root (children that started sessions of their own and
grandchildren included) and resumes them all."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest
from process_trees import kill_tree

from evaluator.freezer import Freezer, _state
from evaluator.isolation_init import descendants
from evaluator.placement import cpu_list

# A parent that forks two spinning children, one of which starts its own session and forks a
# spinning grandchild; the parent spins too.
TREE = """
import os, time
def spin():
    while True:
        pass
if os.fork() == 0:
    spin()
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        spin()
    spin()
print("ready", flush=True)
spin()
"""


def cpu_ticks(pid: int) -> int:
    with open(f"/proc/{pid}/stat", "rb") as f:
        fields = f.read().rsplit(b")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime + stime


@pytest.fixture
def tree():
    proc = subprocess.Popen([sys.executable, "-c", TREE], stdout=subprocess.PIPE, start_new_session=True)
    try:
        assert proc.stdout.readline().strip() == b"ready"
        deadline = time.monotonic() + 5
        while len(descendants(proc.pid) | {proc.pid}) < 4 and time.monotonic() < deadline:
            time.sleep(0.01)
        yield proc
    finally:
        kill_tree(proc)


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="needs /proc")
def test_every_process_below_the_root_stops_and_resumes(tree):
    pids = descendants(tree.pid)
    assert len(pids) == 3  # two children and a grandchild in a session of its own
    freezer = Freezer(tree.pid)  # the root itself (a sandbox's outermost process) is left alone
    assert freezer.freeze() == []
    assert all(_state(pid) == "T" for pid in pids)
    ticks = {pid: cpu_ticks(pid) for pid in pids}
    time.sleep(0.3)
    assert {pid: cpu_ticks(pid) for pid in pids} == ticks  # no CPU time while stopped
    freezer.thaw()
    deadline = time.monotonic() + 5
    while any(_state(pid) == "T" for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not any(_state(pid) == "T" for pid in pids)
    time.sleep(0.3)
    assert all(cpu_ticks(pid) > ticks[pid] for pid in pids)  # running again


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="needs /proc")
def test_a_process_that_does_not_stop_is_named(tree, monkeypatch):
    """One the freezer cannot stop (here: its signals to one pid are lost, as they would be to a
    process it may not signal) comes back by pid and state, after the wait."""
    monkeypatch.setattr("evaluator.freezer.STOP_WAIT_S", 0.1)
    spared = min(descendants(tree.pid))
    freezer = Freezer(tree.pid)
    signal_all = freezer._signal
    monkeypatch.setattr(freezer, "_signal", lambda pids, sig: signal_all(pids - {spared}, sig))
    assert freezer.freeze() == [f"{spared} (state R)"]
    assert all(_state(pid) == "T" for pid in descendants(tree.pid) - {spared})
    freezer.thaw()


# A child that vforks a grandchild which stops itself before it could exec: the child then sleeps in
# the kernel (state D) until the grandchild goes on, as a solution's process would that was spawning
# a program at the moment the freezer stopped it.
VFORK = """
import ctypes, os, signal, time
if os.fork() == 0:
    libc = ctypes.CDLL(None)
    if libc.vfork() == 0:
        getattr(libc, "raise")(signal.SIGSTOP)
        libc._exit(0)
    time.sleep(60)
print("ready", flush=True)
time.sleep(60)
"""


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="needs /proc")
def test_a_vfork_parent_held_by_its_stopped_child_counts_as_stopped():
    proc = subprocess.Popen([sys.executable, "-c", VFORK], stdout=subprocess.PIPE, start_new_session=True)
    try:
        assert proc.stdout.readline().strip() == b"ready"
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            states = {pid: _state(pid) for pid in descendants(proc.pid)}
            if sorted(states.values()) == ["D", "T"]:
                break
            time.sleep(0.01)
        assert sorted(states.values()) == ["D", "T"], states
        t0 = time.monotonic()
        assert Freezer(proc.pid).freeze() == []
        assert time.monotonic() - t0 < 0.5  # not the 1 s wait for a process that will not stop
    finally:
        # The vfork parent first: were the grandchild to go on, the parent would resume on a stack
        # the grandchild has used.
        kill_tree(proc, first=lambda p: _state(p) == "D")


def test_cpu_lists_read_as_the_kernel_writes_them():
    assert cpu_list("0-3,8,10-11\n") == {0, 1, 2, 3, 8, 10, 11}
    assert cpu_list("5") == {5} and cpu_list("") == set()


OFF_PLACEMENT = """
import os, subprocess, sys
child = "import os, sys, time; os.sched_setaffinity(0, {int(c) for c in sys.argv[1].split(',')}); print(flush=True); time.sleep(60)"
subprocess.run([sys.executable, "-c", child, sys.argv[1]])
"""


@pytest.mark.parametrize("widened", [False, True])
def test_a_process_off_its_placement_is_named(widened):
    """The judge's check behind the sandbox's affinity filter: a thread that may run on CPUs beyond
    the placement is named, one within it is not."""
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        pytest.skip("needs two CPUs")
    wanted = cpus if widened else cpus[:1]
    root = subprocess.Popen([sys.executable, "-c", OFF_PLACEMENT, ",".join(map(str, wanted))], stdout=subprocess.PIPE)
    try:
        root.stdout.readline()  # the child has set its CPUs
        found = Freezer(root.pid, placed_cpus={cpus[0]}).off_placement()
        assert bool(found) == widened, found
        assert not widened or all(entry.endswith(f"({','.join(map(str, cpus[1:]))})") for entry in found), found
    finally:
        kill_tree(root)
