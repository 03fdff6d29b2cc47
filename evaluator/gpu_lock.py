"""Draining and holding the GPU work of the solution's processes while the reference is timed.

Stopping a process (evaluator/freezer.py) stops its CPUs, not the kernels it has queued: those run
on, and the GPU shares its time between contexts, so a solution that leaves a long kernel queued
when its batch ends would slow every reference batch that follows (one H100: a stopped process's
spin kernel made another process's 4096x4096 matmul 2.2x slower, a tiny kernel 2.4 ms instead of
16 us). The driver's checkpoint lock (cuCheckpointProcessLock, driver 555 and later) waits until a
process's submitted work is done and blocks its further CUDA calls until unlocked: measured at
0.15 ms per process when it has nothing queued.

The lock needs its target's cooperation: on a stopped process it did not return, timeout or not.
So the judge locks before it stops, resumes before it unlocks, and asks a helper process of its
own (this module's `main`), whose answers it waits for no longer than its deadline: a helper stuck
in the driver is killed, and the judge's own driver state is never at stake. Torch-free.
"""

from __future__ import annotations

import ctypes
import json
import os
import select
import signal
import subprocess
import sys
import time

CUDA_SUCCESS = 0
CUDA_ERROR_NOT_READY = 600  # what the lock answers when its timeout ends first
RUNNING = 0  # CUprocessState: CU_PROCESS_STATE_RUNNING


class _LockArgs(ctypes.Structure):
    _fields_ = [("timeoutMs", ctypes.c_uint), ("reserved0", ctypes.c_uint), ("reserved1", ctypes.c_uint64 * 7)]


class LockUnavailable(Exception):
    """This host's driver cannot lock processes: the judge cannot hold the solution's GPU work."""


class GpuLocker:
    """The judge's side: a helper process that locks and unlocks pids."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "evaluator.gpu_lock"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, close_fds=True)
        hello = self._ask(None, deadline_s=30.0)
        if hello is None or not hello.get("ready"):
            self.close()
            raise LockUnavailable((hello or {}).get("error") or "the lock helper did not start")
        self.locked: set[int] = set()

    def _ask(self, request: dict | None, deadline_s: float) -> dict | None:
        """The helper's answer, or None (the helper killed) when it is late or gone."""
        if self.proc.poll() is not None:
            return None
        try:
            if request is not None:
                self.proc.stdin.write(json.dumps(request).encode() + b"\n")
                self.proc.stdin.flush()
            ready, _, _ = select.select([self.proc.stdout], [], [], deadline_s)
            line = self.proc.stdout.readline() if ready else b""
            return json.loads(line) if line else self._kill()
        except (OSError, ValueError):
            return self._kill()

    def _kill(self) -> None:
        """Ends the helper; returns None, the answer it will never give."""
        self.proc.kill()
        self.proc.wait()
        return None

    def lock(self, pids: set[int], timeout_ms: int) -> list[str]:
        """Locks every one of `pids` that holds a CUDA context, once its queued work is done.
        Returns those that could not be locked in time, each as "pid (why)"."""
        answer = self._ask({"op": "lock", "pids": sorted(pids), "timeout_ms": timeout_ms},
                           deadline_s=2 * timeout_ms / 1000 + 5)
        if answer is None:
            return [f"{pid} (the GPU lock did not answer)" for pid in sorted(pids - self.locked)]
        self.locked.update(answer["locked"])
        return [f"{pid} ({why})" for pid, why in answer["failed"].items()]

    def unlock(self) -> list[str]:
        """Unlocks what `lock` locked (after the processes are running again)."""
        pids, self.locked = sorted(self.locked), set()
        if not pids:
            return []
        answer = self._ask({"op": "unlock", "pids": pids}, deadline_s=10.0)
        if answer is None:
            return [f"{pid} (the GPU lock did not answer)" for pid in pids]
        return [f"{pid} ({why})" for pid, why in answer["failed"].items()]

    def close(self) -> None:
        if self.proc.poll() is None:
            self._kill()


# -- the helper process ------------------------------------------------------------------------
def _driver() -> ctypes.CDLL:
    cuda = ctypes.CDLL("libcuda.so.1")
    for name in ("cuCheckpointProcessLock", "cuCheckpointProcessUnlock", "cuCheckpointProcessGetState"):
        if not hasattr(cuda, name):
            raise LockUnavailable(f"the driver has no {name} (driver 555 or later has it)")
    if (rc := cuda.cuInit(0)) != CUDA_SUCCESS:
        raise LockUnavailable(f"cuInit failed ({rc})")
    return cuda


def _state(cuda: ctypes.CDLL, pid: int) -> int | None:
    """The process's checkpoint state, or None when it holds no CUDA context (or is gone)."""
    state = ctypes.c_int(-1)
    return state.value if cuda.cuCheckpointProcessGetState(pid, ctypes.byref(state)) == CUDA_SUCCESS else None


def _lock(cuda: ctypes.CDLL, pids: list[int], timeout_ms: int) -> dict:
    locked, failed = [], {}
    deadline = time.monotonic() + timeout_ms / 1000
    for pid in pids:
        state = _state(cuda, pid)
        if state is None:
            continue  # no CUDA context: nothing on the GPU
        if state != RUNNING:
            failed[pid] = f"its CUDA state is {state}, not running"
            continue
        left_ms = max(1, int((deadline - time.monotonic()) * 1000))
        rc = cuda.cuCheckpointProcessLock(pid, ctypes.byref(_LockArgs(left_ms, 0)))
        if rc == CUDA_SUCCESS:
            locked.append(pid)
        elif _state(cuda, pid) is not None:  # not gone meanwhile
            failed[pid] = f"its GPU work was still running after {timeout_ms} ms" if rc == CUDA_ERROR_NOT_READY else f"lock failed ({rc})"
    return {"locked": locked, "failed": failed}


def _unlock(cuda: ctypes.CDLL, pids: list[int]) -> dict:
    failed = {}
    for pid in pids:
        rc = cuda.cuCheckpointProcessUnlock(pid, None)
        if rc != CUDA_SUCCESS and _state(cuda, pid) is not None:
            failed[pid] = f"unlock failed ({rc})"
    return {"failed": failed}


def main() -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # ends with its judge (stdin closed) or killed
    out = os.fdopen(1, "w", buffering=1)
    try:
        cuda = _driver()
    except (OSError, LockUnavailable) as exc:
        out.write(json.dumps({"ready": False, "error": str(exc)}) + "\n")
        return 1
    out.write(json.dumps({"ready": True}) + "\n")
    for line in sys.stdin:
        request = json.loads(line)
        if request["op"] == "lock":
            answer = _lock(cuda, request["pids"], int(request["timeout_ms"]))
        else:
            answer = _unlock(cuda, request["pids"])
        out.write(json.dumps(answer) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
