"""Which CPUs each rank's judge and players run on. In gpu mode (the one whose times rank) both
sides' players of a rank share one CPU, and the judge has one of its own; a host may choose
otherwise with PKB_PIN_CPUS: "one" (that), "1" (each rank a slice: the judge its first CPU, the
players the rest) or "0" (no pinning, the default in the other modes).

Why: on a virtual machine a CPU's speed changes for seconds at a time, by up to 1.8x, each CPU
on its own (bench/cpu_states.py on an H100 host: every one of 16 CPUs moved between two levels
in 2 s windows, with no steal time). Two player processes on different CPUs then time identical
host-bound code up to 2x apart, and a side that stays on a slow CPU for a whole evaluation moves
the speedup with an interval that cannot show it. The two players of a rank never run at once
(the solution's are stopped while the reference is timed), so they can share one CPU; a pair's
two batches, back to back, then meet the same state and it cancels in their ratio. Measured
(bench/NOTES.md, "Identical code across the suite"): identical code on five host-bound shapes
read within [0.97, 1.03] in 12 of 15 fresh evaluations on one CPU, 7 of 15 unpinned.

The players start on the rest of their rank's slice, so that their imports, CUDA start-up and the
solution's build run side by side (on one CPU they cost an evaluation about 2.5 s); rank 0's judge
moves every thread of both sandboxes onto the rank's one CPU once both sides have loaded (settle),
before the first correctness trial. A player cannot move itself: its sched_setaffinity does
nothing from its start (isolation_init.keep_affinity), and the judge checks at every stop
(evaluator/freezer.py).
Torch-free and small: the launcher and the judge import it.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

from evaluator.isolation_init import descendants

ENV = "PKB_PIN_CPUS"
WORKER_ENV = "PKB_WORKER_CPUS"  # a GPU worker's own CPUs (evaluator/worker.py), for hosts with several workers


# How many times settle walks a sandbox: a thread started during a walk, by one not yet moved, is
# found on the next. The judge refuses a solution whose threads are still found elsewhere after the
# last walk, or at any stop (Freezer.off_placement).
SETTLE_PASSES = 5


@dataclass(frozen=True)
class Placement:
    judge: tuple[int, ...]
    players: tuple[int, ...]  # both sides' players of the rank, once both sides have loaded
    loading: tuple[int, ...] = ()  # the players' CPUs until both sides have loaded; empty: `players`

    @property
    def start(self) -> tuple[int, ...]:
        return self.loading or self.players


SETTINGS = ("0", "1", "one")  # what a host may set PKB_PIN_CPUS to; anything else: the mode's default
DEFAULT = {"gpu": "one"}  # by mode; any other mode: "0"


def plan(world_size: int, cpus: Sequence[int], one_player_cpu: bool = False) -> list[Placement]:
    """Consecutive slices of `cpus`, one per rank; in each, the first CPU for the judge and the
    rest for the players (with one_player_cpu, the rest while they load, then the next one only).
    A slice of one CPU is shared; fewer CPUs than ranks: every rank gets all."""
    if world_size < 1 or not cpus:
        raise ValueError("need at least one rank and one CPU")
    cpus = sorted(cpus)
    per = len(cpus) // world_size
    if per == 0:
        return [Placement(tuple(cpus), tuple(cpus))] * world_size
    placements = []
    for rank in range(world_size):
        part = tuple(cpus[rank * per : (rank + 1) * per])
        if len(part) == 1:
            placements.append(Placement(part, part))
        elif one_player_cpu and len(part) > 2:
            placements.append(Placement(part[:1], part[1:2], loading=part[1:]))
        else:
            placements.append(Placement(part[:1], part[1:2] if one_player_cpu else part[1:]))
    return placements


def for_host(world_size: int, mode: str) -> list[Placement] | None:
    """The placements for an evaluation on this host, or None when pinning is off. The default
    pins only where every rank gets a CPU for its judge and one for its players."""
    cpus, asked = sorted(os.sched_getaffinity(0)), os.environ.get(ENV, "")
    chosen = asked if asked in SETTINGS else DEFAULT.get(mode, "0")
    if chosen == "0" or (asked not in SETTINGS and len(cpus) < 2 * world_size):
        return None
    return plan(world_size, cpus, one_player_cpu=chosen == "one")


def settle(root: int, placements: Sequence[Placement]) -> list[str]:
    """Moves every thread below `root` (a sandbox's outermost process) from where it loaded
    to where it is timed: a thread within a rank's loading CPUs to that rank's players' CPUs, any
    other (the sandbox's own processes span every rank's) to all ranks' players' CPUs. Returns the
    threads found elsewhere on the last of SETTLE_PASSES walks, as "pid/tid (CPUs)": empty once a
    walk finds every thread in place."""
    moves = [(set(p.start), set(p.players)) for p in placements]
    every = set().union(*(players for _start, players in moves))
    left: list[str] = []
    for _ in range(SETTLE_PASSES):
        left = []
        for pid in sorted(descendants(root)):
            for tid, cpus in threads_cpus(pid).items():
                target = next((players for start, players in moves if cpus <= start), every)
                if cpus <= target:
                    continue
                try:
                    os.sched_setaffinity(tid, target)
                except ProcessLookupError:
                    continue  # gone meanwhile
                except OSError as exc:
                    left.append(f"{pid}/{tid} ({exc.strerror})")
                    continue
                left.append(f"{pid}/{tid} ({','.join(map(str, sorted(cpus)))})")
        if not left:
            break
    return left


def threads_cpus(pid: int) -> dict[int, set[int]]:
    """Each thread of the process: the CPUs it may run on. Asked of the kernel per thread, which is
    about 20 times faster than reading each thread's status file (0.035 against 0.73 ms for 31
    threads), and the judge asks at every stop of the solution."""
    found = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for tid in tids:
        try:
            found[int(tid)] = os.sched_getaffinity(int(tid))
        except (OSError, ValueError):
            continue  # gone meanwhile
    return found


def cpu_list(text: str) -> set[int]:
    """The CPUs of a list such as "0-3,8,10-11"."""
    cpus: set[int] = set()
    for part in filter(None, text.strip().split(",")):
        low, _, high = part.partition("-")
        cpus.update(range(int(low), int(high or low) + 1))
    return cpus
