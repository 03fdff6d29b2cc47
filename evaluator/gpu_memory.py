"""Whose GPU memory it was when the judge ran out. The two players of a rank share its GPU with the
judge, and a solution's memory stays allocated while it is stopped: a solution that holds nearly
all of it leaves the judge no room for the evaluation's own buffers (its input draws, arenas and
output snapshots). Without this, that would read as the host's failure and be retried; with it,
the judge names the solution when the driver shows its processes holding more than the
reference's, and the host otherwise.

Torch-free: asks the driver through nvidia-smi, whose process ids are the host's, as the judge
sees the sandboxes' processes.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterable

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


def solutions_share(held: dict[int, int], solution_pids: Iterable[int], reference_pids: Iterable[int]) -> str | None:
    """Why the solution ran the GPU out of memory: its processes hold more of it than the
    reference's (identical code would hold as much); None where they do not, or nothing is known."""
    solution = sum(held.get(pid, 0) for pid in set(solution_pids))
    reference = sum(held.get(pid, 0) for pid in set(reference_pids))
    if solution <= reference:
        return None
    return (f"the GPU ran out of memory for the evaluation's own buffers while the solution's processes held "
            f"{solution / 2**30:.1f} GiB of it (the reference's {reference / 2**30:.1f} GiB): a solution must leave "
            "the evaluation room on the GPU it shares")
