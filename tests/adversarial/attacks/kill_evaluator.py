"""Kill the evaluator instead of being judged.

VARIANT "parent": SIGKILL to `os.getppid()` (the judge, or whatever started this process).
VARIANT "group": SIGKILL to its own process group (`os.killpg(os.getpgid(0))`).
VARIANT "everyone": SIGKILL to every process it may signal (`os.kill(-1)`).

Each variant refuses to act where it could reach the test runner (RUNNER_PID, started at
RUNNER_START, in group RUNNER_PGID, all set by the test): "everyone" acts only where the runner is
invisible (another PID namespace), "parent" never targets the runner or pid 0/1, "group" never
the runner's group. The tests add their own guard (they need the players' sandbox) for the
variants that could reach anything else. Refusing (or surviving its own signal, as `kill(-1)`'s
sender does), it computes honestly; it prints what it does.

Problem: allreduce. A result document must come back, in bounded time, with nothing left running;
where the signal reached the judge or the solution, it says runtime_error or rejected.
"""

import os
import signal

import torch
import torch.distributed as dist

VARIANT = "parent"
RUNNER_PID = None
RUNNER_PGID = None
RUNNER_START = None

_done = []


def _start_time(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def _runner_visible() -> bool:
    if RUNNER_PID is None or not os.path.isdir("/proc/self"):
        return True  # cannot tell: assume the worst
    return _start_time(RUNNER_PID) == RUNNER_START


def _send(target: str, kill) -> None:
    print(f"kill_evaluator: sending SIGKILL to {target}", flush=True)
    kill()


def _attack() -> None:
    if VARIANT == "parent":
        ppid = os.getppid()
        if ppid > 1 and ppid != RUNNER_PID and RUNNER_PID is not None:
            return _send(f"parent {ppid}", lambda: os.kill(ppid, signal.SIGKILL))
    elif VARIANT == "group":
        pgid = os.getpgid(0)
        if RUNNER_PGID is not None and pgid not in (RUNNER_PGID, 0, 1):
            return _send(f"process group {pgid}", lambda: os.killpg(pgid, signal.SIGKILL))
    elif VARIANT == "everyone":
        if not _runner_visible():
            return _send("every process it may signal", lambda: os.kill(-1, signal.SIGKILL))
    else:
        raise ValueError(f"unknown variant {VARIANT!r}")
    print("kill_evaluator: no target it may signal", flush=True)


@torch.no_grad()
def solution(tensor):
    if not _done:
        _done.append(True)
        _attack()
    dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
    return tensor
