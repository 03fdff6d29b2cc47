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
read within [0.97, 1.03] in 12 of 15 fresh evaluations on one CPU, 7 of 15 unpinned. The cost:
both players start on that CPU (an evaluation about 2.5 s longer). A placed player cannot widen
its set: its sched_setaffinity does nothing (isolation_init.keep_affinity), and the judge checks.
Torch-free and small: the launcher imports it.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

ENV = "PKB_PIN_CPUS"
WORKER_ENV = "PKB_WORKER_CPUS"  # a GPU worker's own CPUs (evaluator/worker.py), for hosts with several workers


@dataclass(frozen=True)
class Placement:
    judge: tuple[int, ...]
    players: tuple[int, ...]  # both sides' players of the rank


SETTINGS = ("0", "1", "one")  # what a host may set PKB_PIN_CPUS to; anything else: the mode's default
DEFAULT = {"gpu": "one"}  # by mode; any other mode: "0"


def plan(world_size: int, cpus: Sequence[int], one_player_cpu: bool = False) -> list[Placement]:
    """Consecutive slices of `cpus`, one per rank; in each, the first CPU for the judge and the
    rest (or, with one_player_cpu, the next one only) for the players. A slice of one CPU is
    shared; fewer CPUs than ranks: every rank gets all."""
    if world_size < 1 or not cpus:
        raise ValueError("need at least one rank and one CPU")
    cpus = sorted(cpus)
    per = len(cpus) // world_size
    if per == 0:
        return [Placement(tuple(cpus), tuple(cpus))] * world_size
    placements = []
    for rank in range(world_size):
        part = tuple(cpus[rank * per : (rank + 1) * per])
        players = part[1:2] if one_player_cpu else part[1:]
        placements.append(Placement(part[:1], players) if len(part) > 1 else Placement(part, part))
    return placements


def for_host(world_size: int, mode: str) -> list[Placement] | None:
    """The placements for an evaluation on this host, or None when pinning is off. The default
    pins only where every rank gets a CPU for its judge and one for its players."""
    cpus, asked = sorted(os.sched_getaffinity(0)), os.environ.get(ENV, "")
    chosen = asked if asked in SETTINGS else DEFAULT.get(mode, "0")
    if chosen == "0" or (asked not in SETTINGS and len(cpus) < 2 * world_size):
        return None
    return plan(world_size, cpus, one_player_cpu=chosen == "one")


def cpu_list(text: str) -> set[int]:
    """The CPUs of a list such as "0-3,8,10-11"."""
    cpus: set[int] = set()
    for part in filter(None, text.strip().split(",")):
        low, _, high = part.partition("-")
        cpus.update(range(int(low), int(high or low) + 1))
    return cpus
