"""Which CPUs each rank's judge and players run on, when the host asks for it: PKB_PIN_CPUS=1 gives
each rank a slice of the CPUs, PKB_PIN_CPUS=one puts both sides' players of a rank on one CPU.

Why: on host-bound calls, identical code in two player processes ran 1-5% apart for a whole
evaluation on an H100 host (bench/NOTES.md, the noise table), an offset that the interval over
pairs cannot see. The two players of a rank never run at once (the solution's are stopped while
the reference is timed), so both can be given the same CPUs, and the judge one of its own: then
neither side can draw the faster core. On a virtual machine a CPU's speed can change for
seconds at a time (another tenant on its core); players that share one CPU share its state too,
so it cancels in a pair's ratio. Off by default until measured on a GPU host. A solution may
widen its own set with sched_setaffinity: this evens out honest code, it is not a boundary.
Torch-free and small: the launcher imports it.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

ENV = "PKB_PIN_CPUS"


@dataclass(frozen=True)
class Placement:
    judge: tuple[int, ...]
    players: tuple[int, ...]  # both sides' players of the rank


def setting() -> str:
    """"1" (slices), "one" (one CPU for a rank's players) or "" (off)."""
    value = os.environ.get(ENV, "")
    return value if value in ("1", "one") else ""


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


def for_host(world_size: int) -> list[Placement] | None:
    """The placements for an evaluation on this host, or None when pinning is off."""
    mode = setting()
    return plan(world_size, sorted(os.sched_getaffinity(0)), one_player_cpu=mode == "one") if mode else None
