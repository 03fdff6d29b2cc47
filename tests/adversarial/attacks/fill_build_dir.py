"""Fill the host's disk through the one place on it the solution may write: its build directory,
kept between evaluations of the same code. RLIMIT_FSIZE caps each file at 4 GiB, not their number.
Appended to the reference's source by the test; the outputs stay honest.

VARIANT "bytes": on its first call, rank 0 writes files of CHUNK_MIB into the build directory
(the parent of TRITON_CACHE_DIR) until CAP_MIB have gone in or a write fails.
VARIANT "entries": on its first call, rank 0 creates ENTRIES empty files there (the number of
entries, not their size, costs the host: inodes, and the time to walk them).

The evaluation must be `rejected` for it, and the directory must be gone afterwards.
"""

import os as _os

import torch.distributed as _dist

VARIANT = "bytes"
CHUNK_MIB = 16
CAP_MIB = 256
ENTRIES = 100_100
_first = [True]
_reference_solution = solution  # noqa: F821 - the reference's, defined above this file


def _fill():
    build_dir = _os.path.dirname(_os.environ["TRITON_CACHE_DIR"])
    junk = _os.path.join(build_dir, "pkb-attack-junk")
    _os.makedirs(junk, exist_ok=True)
    if VARIANT == "entries":
        for i in range(ENTRIES):
            _os.close(_os.open(_os.path.join(junk, str(i)), _os.O_WRONLY | _os.O_CREAT, 0o600))
        return
    chunk = b"\x5a" * (CHUNK_MIB << 20)
    for i in range(CAP_MIB // CHUNK_MIB):
        try:
            with open(_os.path.join(junk, f"chunk-{i}"), "wb") as f:
                f.write(chunk)
        except OSError:
            return


def solution(*inputs):
    if _first[0] and _dist.get_rank() == 0:
        _first[0] = False
        _fill()
    return _reference_solution(*inputs)
