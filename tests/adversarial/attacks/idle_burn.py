"""Slow the reference down from other processes that burn the host's CPUs whenever the solution is
not in a call.

Appended to a problem's reference source (the test does it), so the solution itself is honest:
allreduce in cpu mode, gsplat_3d_gaussian_splatting on a GPU (a one-rank all-reduce's few
microseconds per call move by several times from one evaluation to the next there, more than this
attack would gain; gsplat holds within 1%). At import, the solution forks BURNERS processes and patches its player's `prepare` and `run` operations (evaluator/
player.py, which shares its process): from the moment its player is told of a batch until that
batch's calls are done, the burners sleep; the rest of the time, which is whenever the reference's
player runs, every burner spins. The reference's player then shares
the CPUs with the burners and the solution does not: without a defence the reference reads
several times slower and the speedup several times higher.

VARIANT "processes": forked burner processes (in the solution's sandbox).
VARIANT "setsid": the same, each in a new session and process group of its own, as a burner
hiding from a signal sent to its parent's group would be.

The judge must report a speedup within SPEED_MARGIN of the honest one (the reference against
itself).
"""

import mmap
import os
import sys
import time

VARIANT = "processes"
BURNERS = 8

_busy = mmap.mmap(-1, 1)  # shared with the forked burners: 1 from `prepare` to the end of `run`
_wake_r, _wake_w = os.pipe()  # idle burners block here, so that they cost the solution nothing


def _burn() -> None:
    if VARIANT == "setsid":
        os.setsid()
    x = 0
    while True:
        os.read(_wake_r, 1)
        time.sleep(0.002)  # past the judge's read of this batch's outputs
        while not _busy[0]:
            end = time.perf_counter() + 0.0005
            while time.perf_counter() < end:
                x += 1


def _patch_player() -> None:
    player = sys.modules.get("__main__")  # the player runs as `python -m evaluator.player`
    cls = getattr(player, "Player", None)
    if cls is None:
        return
    prepare, run = cls.op_prepare, cls.op_run

    def op_prepare(self, msg, fds):
        _busy[0] = 1
        return prepare(self, msg, fds)

    def op_run(self, msg, fds):
        try:
            return run(self, msg, fds)
        finally:
            _busy[0] = 0
            os.write(_wake_w, b"x" * BURNERS)

    cls.op_prepare, cls.op_run = op_prepare, op_run


def _start() -> None:
    _patch_player()
    for _ in range(BURNERS):
        if os.fork() == 0:
            try:
                _burn()
            finally:
                os._exit(0)


_start()
