"""How much of the host's disk a solution's build directory takes. The directory is the one
place on the host's disks a solution may write (docs/sandbox.md), and it is kept between
evaluations of the same code; RLIMIT_FSIZE caps each file, not their number. The launcher checks
it while the solution runs and once after, ends an evaluation whose directory grew past its limit,
and deletes such a directory rather than keep it.

Torch-free: the judge's parent process imports it.
"""

from __future__ import annotations

import os
from pathlib import Path

LIMIT_ENV = "PKB_BUILD_DIR_MIB"
DEFAULT_LIMIT_BYTES = 4 << 30  # builds take tens of MB (a CUDA extension, Triton's cache)
MAX_ENTRIES = 100_000  # a directory holding more is over its limit, whatever their size


def limit_bytes() -> int:
    setting = os.environ.get(LIMIT_ENV)
    return int(setting) << 20 if setting else DEFAULT_LIMIT_BYTES


def tree_bytes(root: Path, max_entries: int = MAX_ENTRIES) -> int | None:
    """Bytes the tree's files occupy on disk (allocated blocks: a sparse file counts what it
    holds), links not followed; None when it holds more than `max_entries` entries."""
    total, entries, stack = 0, 0, [str(root)]
    while stack:
        try:
            with os.scandir(stack.pop()) as listing:
                for entry in listing:
                    entries += 1
                    if entries > max_entries:
                        return None
                    try:
                        total += entry.stat(follow_symlinks=False).st_blocks * 512
                        if entry.is_dir(follow_symlinks=False):
                            stack.append(entry.path)
                    except OSError:
                        continue  # removed while we looked
        except OSError:
            continue
    return total


def over_limit(root: Path, limit: int) -> str | None:
    """Why the solution's build directory is over its limit, or None."""
    used = tree_bytes(root)
    if used is None:
        return (f"the solution's build directory holds more than {MAX_ENTRIES} files and directories; "
                "a solution may keep at most that many there")
    if used > limit:
        return (f"the solution's build directory grew to {used / 2**20:.0f} MiB, past its limit of "
                f"{limit / 2**20:.0f} MiB: a solution's builds and caches must fit in it")
    return None
