"""Whose GPU memory it was when the judge ran out. The two players of a rank share its GPU with the
judge, and a solution's memory stays allocated while it is stopped: a solution that holds nearly
all of it leaves the judge no room for the evaluation's own buffers (its input draws, arenas and
output snapshots). Without this, that would read as the host's failure and be retried; with it,
the judge names the solution when the driver shows its processes holding more than the
reference's, and the host otherwise. The same question decides whose failure it is when the
reference itself runs out.

Torch-free: asks the driver through nvidia-smi, whose process ids are the host's, as the judge
sees the sandboxes' processes.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterable
from enum import StrEnum

QUERY = ["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"]


def parse_held(text: str) -> dict[int, int]:
    """Bytes of GPU memory per process from nvidia-smi's `pid, MiB` lines (summed over GPUs); lines
    that are not such (a process the driver cannot name: "[N/A]") are skipped."""
    held: dict[int, int] = {}
    for line in text.splitlines():
        pid, _, mib = line.partition(",")
        try:
            held[int(pid)] = held.get(int(pid), 0) + (int(mib.strip()) << 20)
        except ValueError:
            continue
    return held


def held_by_pid() -> dict[int, int]:
    """Bytes of GPU memory each process holds now; empty where the driver cannot be asked (or, in a
    container of its own, shows no processes)."""
    try:
        done = subprocess.run(QUERY, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return {}
    return parse_held(done.stdout) if done.returncode == 0 else {}


def reads_as_out_of_memory(failure: str) -> bool:
    """Whether a failure, as `Type: message`, is the GPU running out of memory: the caching
    allocator's OutOfMemoryError, or the CUDA runtime's own error (an AcceleratorError from a
    library's or a kernel's allocation outside the allocator)."""
    return failure.startswith("OutOfMemoryError:") or "CUDA error: out of memory" in failure


def shares(held: dict[int, int], solution_pids: Iterable[int], reference_pids: Iterable[int]) -> tuple[int, int] | None:
    """Bytes of GPU memory the solution's and the reference's processes hold; None where the driver
    shows none of the reference's (nothing is known: no driver tool, a container of its own, or
    process ids of another namespace), since a reference's CUDA context always holds some."""
    solution = sum(held.get(pid, 0) for pid in set(solution_pids))
    reference = sum(held.get(pid, 0) for pid in set(reference_pids))
    return (solution, reference) if reference else None


def held_phrase(solution: int, reference: int) -> str:
    return f"the solution's processes held {solution / 2**30:.1f} GiB of it (the reference's {reference / 2**30:.1f} GiB)"


def solutions_share(held: dict[int, int], solution_pids: Iterable[int], reference_pids: Iterable[int]) -> str | None:
    """Why the solution ran the GPU out of memory: its processes hold more of it than the
    reference's (identical code would hold as much); None where they do not, or nothing is known."""
    known = shares(held, solution_pids, reference_pids)
    if known is None or known[0] <= known[1]:
        return None
    return (f"the GPU ran out of memory for the evaluation's own buffers while {held_phrase(*known)}: "
            "a solution must leave the evaluation room on the GPU it shares")


class Blame(StrEnum):
    SOLUTION = "solution"  # its processes hold more of the GPU than the reference's
    HOST = "host"  # they hold no more: the GPU is short for the reference by itself
    UNKNOWN = "unknown"  # the driver showed none of the reference's processes


def reference_shortage(held: dict[int, int], solution_pids: Iterable[int],
                       reference_pids: Iterable[int]) -> tuple[Blame, str]:
    """Whose failure the reference's own OutOfMemoryError is, and why in words ("" when unknown)."""
    known = shares(held, solution_pids, reference_pids)
    if known is None:
        return Blame.UNKNOWN, ""
    if known[0] > known[1]:
        return Blame.SOLUTION, (f"the reference ran out of GPU memory while {held_phrase(*known)}: a solution must "
                                "leave the reference room on the GPU it shares")
    return Blame.HOST, (f"the reference ran out of GPU memory while {held_phrase(*known)}: the GPU is short of "
                        "memory for the reference by itself")


def starved_reference(held: dict[int, int], solution_pids: Iterable[int], reference_pids: Iterable[int],
                      retries: int) -> str | None:
    """Why a speedup cannot stand: the reference's allocator ran short of memory (emptied its cache
    and retried) `retries` times while it was timed, beside a solution whose processes hold more of
    the GPU than the reference's; None where they do not, or nothing is known. Identical code holds
    as much, so it never reads so."""
    known = shares(held, solution_pids, reference_pids)
    if not retries or known is None or known[0] <= known[1]:
        return None
    return (f"the reference ran short of GPU memory while it was timed (its allocator emptied its cache and "
            f"retried {retries} times) while {held_phrase(*known)}: a speedup measured so reads high, so none "
            "is given; a solution must leave the reference room on the GPU it shares")
