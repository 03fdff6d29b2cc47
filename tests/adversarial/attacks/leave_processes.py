"""Leave something running after the evaluation. Whatever it leaves touches HEARTBEAT (a file the
test names) every 0.1 s, so the test can tell whether it still runs, in any PID namespace.

VARIANT "daemon": a double fork with `setsid()` in between: a grandchild in a session of its own,
re-parented away from this process.
VARIANT "ignore_sigterm": a child that ignores SIGTERM, SIGINT and SIGHUP and leaves the process group.
VARIANT "fork_bomb": FORKS children at once (bounded), each sleeping; only ever run in the sandbox.
VARIANT "thread": a non-daemon thread that never ends (the interpreter cannot exit normally).

Problem: allreduce; the outputs are honest. The result document must come back, and nothing may be
left running afterwards.
"""

import os
import signal
import threading
import time

import torch
import torch.distributed as dist

VARIANT = "daemon"
HEARTBEAT = None
FORKS = 200
LIFETIME_S = 600

_done = []


def _beat_forever() -> None:
    end = time.monotonic() + LIFETIME_S
    while time.monotonic() < end:
        if HEARTBEAT:
            try:
                with open(HEARTBEAT, "a") as f:
                    f.write(".")
            except OSError:
                pass
        time.sleep(0.1)


def _child(body) -> None:
    """Runs `body` in a forked child that never returns into the caller's code."""
    try:
        body()
    finally:
        os._exit(0)


def _daemon() -> None:
    if os.fork() == 0:
        def middle():
            os.setsid()
            if os.fork() == 0:
                _child(_beat_forever)

        _child(middle)


def _stubborn() -> None:
    if os.fork() == 0:
        def body():
            for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
                signal.signal(sig, signal.SIG_IGN)
            os.setpgid(0, 0)
            _beat_forever()

        _child(body)


def _bomb() -> None:
    for i in range(FORKS):
        if os.fork() == 0:
            _child(_beat_forever if i == 0 else (lambda: time.sleep(LIFETIME_S)))


def _attack() -> None:
    if VARIANT == "daemon":
        _daemon()
    elif VARIANT == "ignore_sigterm":
        _stubborn()
    elif VARIANT == "fork_bomb":
        _bomb()
    elif VARIANT == "thread":
        threading.Thread(target=_beat_forever, daemon=False, name="pkb-attack-forever").start()
    else:
        raise ValueError(f"unknown variant {VARIANT!r}")


@torch.no_grad()
def solution(tensor):
    if not _done:
        _done.append(True)
        _attack()
    dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
    return tensor
