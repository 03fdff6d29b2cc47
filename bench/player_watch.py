"""What the scheduler did to each player process during an evaluation: CPU time, time spent ready
but waiting for a CPU, involuntary context switches, page faults, and which CPUs it ran on. For telling apart
the causes of an offset between two processes of identical code (bench/suite_timings.py
`--watch`): a slow side that waited for CPUs, or was switched out, was short of CPU; one that
was not ran slower on its own. Also every thread on the host, every half second: the busiest
ones while watched (a spinning thread on a CPU's hyperthread sibling halves that CPU's speed).

Samples /proc every 20 ms from a thread of the benchmark's process; a player is a process whose
command line runs `evaluator.player`, its side read from its build directory (the reference's
players build under `reference`). Linux only; reads other processes' /proc entries, so run it as
the user that runs the evaluation.
"""

from __future__ import annotations

import collections
import os
import threading
import time
from dataclasses import dataclass, field

from evaluator.forkserver import player_index

SAMPLE_S = 0.02
RECHECK_S = 0.5  # a process that was not a player yet (before its exec) is looked at again after this
THREAD_SCAN_S = 0.5
TICK_S = 1 / os.sysconf("SC_CLK_TCK")


@dataclass
class Player:
    side: str
    rank: str
    first: tuple[int, int, int, int] | None = None  # run ns, wait ns, involuntary switches, minor faults at first sight
    last: tuple[int, int, int, int] | None = None
    cpus: collections.Counter = field(default_factory=collections.Counter)


def _read(path: str) -> str | None:
    try:
        with open(path, "rb") as f:
            return f.read().decode(errors="replace")
    except OSError:
        return None


def _identify(pid: str) -> Player | None:
    cmdline = _read(f"/proc/{pid}/cmdline")
    if not cmdline or "evaluator.player" not in cmdline:
        return None
    forked = player_index(int(pid))  # a forked player's environ is its fork server's
    if forked is None and "evaluator.forkserver" in cmdline:
        return None  # the fork server itself, before its forks (its command line names the players')
    environ = dict(kv.split("=", 1) for kv in (_read(f"/proc/{pid}/environ") or "").split("\0") if "=" in kv)
    build = environ.get("TORCH_EXTENSIONS_DIR", "")
    side = "reference" if "/reference/" in build else "solution"
    return Player(side=side, rank=str(forked) if forked is not None else environ.get("RANK", "?"))


def _stat_fields(stat: str) -> list[str]:
    """A /proc stat line's fields after the command name (which may hold spaces and parentheses):
    index 0 is field 3 (the state), 7 minor faults, 11 and 12 utime and stime, 36 the CPU last run on."""
    return stat.rsplit(")", 1)[1].split()


def _sample(pid: str) -> tuple[tuple[int, int, int, int], int] | None:
    schedstat, status, stat = (_read(f"/proc/{pid}/{name}") for name in ("schedstat", "status", "stat"))
    if not (schedstat and status and stat):
        return None
    run_ns, wait_ns = (int(v) for v in schedstat.split()[:2])
    involuntary = next((int(line.split()[1]) for line in status.splitlines() if line.startswith("nonvoluntary_ctxt_switches")), 0)
    fields = _stat_fields(stat)
    return (run_ns, wait_ns, involuntary, int(fields[7])), int(fields[36])


@dataclass
class Thread:
    process: str  # the process's command line, shortened
    name: str
    first: int  # CPU ticks (user + system) at first sight
    last: int
    cpus: collections.Counter = field(default_factory=collections.Counter)


def _threads() -> dict[tuple[str, str], tuple[str, int, int]]:
    """Every thread on the host: (pid, tid) -> (name, CPU ticks, the CPU it last ran on)."""
    found = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tids:
            stat = _read(f"/proc/{pid}/task/{tid}/stat")
            if not stat or ")" not in stat:
                continue
            name = stat[stat.index("(") + 1 : stat.rindex(")")]
            fields = _stat_fields(stat)
            found[(pid, tid)] = (name, int(fields[11]) + int(fields[12]), int(fields[36]))
    return found


class PlayerWatch:
    """with PlayerWatch() as watch: ...; then watch.summary()."""

    def __init__(self) -> None:
        self.players: dict[str, Player] = {}
        self.ignored: dict[str, float] = {}  # pid -> when it was last found not to be a player
        self.threads: dict[tuple[str, str], Thread] = {}
        self._last_scan = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> PlayerWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(SAMPLE_S):
            now = time.monotonic()
            if now - self._last_scan >= THREAD_SCAN_S:
                self._last_scan = now
                self._scan_threads()
            for pid in os.listdir("/proc"):
                if not pid.isdigit() or now - self.ignored.get(pid, -RECHECK_S) < RECHECK_S:
                    continue
                player = self.players.get(pid)
                if player is None:
                    player = _identify(pid)
                    if player is None:
                        self.ignored[pid] = now
                        continue
                    self.players[pid] = player
                got = _sample(pid)
                if got is None:
                    continue
                counters, cpu = got
                player.first = player.first or counters
                player.last = counters
                player.cpus[cpu] += 1

    def _scan_threads(self) -> None:
        for key, (name, ticks, cpu) in _threads().items():
            thread = self.threads.get(key)
            if thread is None:
                cmdline = (_read(f"/proc/{key[0]}/cmdline") or "").replace("\0", " ").strip()
                thread = self.threads[key] = Thread(process=cmdline[:80], name=name, first=ticks, last=ticks)
            thread.last = ticks
            thread.cpus[cpu] += 1

    def busiest_threads(self, n: int = 8) -> list[dict]:
        """The `n` threads that used the most CPU while watched: process, thread name, CPU seconds,
        the CPUs they were seen on."""
        ranked = sorted(self.threads.items(), key=lambda kv: kv[1].first - kv[1].last)[:n]
        return [{"pid": int(pid), "tid": int(tid), "process": t.process, "thread": t.name,
                 "cpu_s": (t.last - t.first) * TICK_S, "cpus": [c for c, _ in t.cpus.most_common(4)]}
                for (pid, tid), t in ranked]

    def summary(self) -> list[dict]:
        """Per player seen: side, rank, CPU seconds, runqueue-wait seconds, involuntary switches and
        minor page faults while watched (its whole life but the first sample: start-up included), and the CPUs it was
        seen on (most often first)."""
        rows = []
        for pid, p in sorted(self.players.items(), key=lambda kv: (kv[1].side, kv[1].rank)):
            if p.first is None:
                continue
            run, wait, invol, faults = (b - a for a, b in zip(p.first, p.last))
            rows.append({"pid": int(pid), "side": p.side, "rank": p.rank, "run_s": run / 1e9, "wait_s": wait / 1e9,
                         "involuntary": invol, "minor_faults": faults, "cpus": [c for c, _ in p.cpus.most_common(4)]})
        return rows
