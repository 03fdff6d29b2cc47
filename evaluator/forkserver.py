"""Starts the players of one sandbox by forking rather than each from a fresh interpreter: imports
what every player imports (torch: about 1.5 s of CPU each, most of a small evaluation's start) once,
then forks one child per player and runs its `python -m MODULE ARGS` or `python -c CODE ARGS` in it.
Started by the sandbox's pid 1 (evaluator/isolation_init.py) in its place, without privileges;
it exits once every player is forked, and the players become pid 1's children.

Each child is what its own interpreter would have been: its own session, stdout and stderr on its
log, only its own fds, its own environment and CPUs, named `player-<index>` (player_index). Only
the preloaded modules are shared, and they are the judge's side of the code: a solution is loaded
by its player after the fork. Nothing here may start a thread or touch a GPU before the forks
(CUDA does not survive a fork).

    python -m evaluator.forkserver SPEC_JSON
        SPEC: {"preload": [module, ...], "pids_fd": FD,
               "players": [{"argv", "env", "fds", "log_fd", "cpus"}, ...]}

Writes one JSON line per player on `pids_fd`: {"player": i, "pid": PID} or {"player": i, "error": ...}.
Standard library only (and evaluator/isolation_init.py, which is too).
"""

from __future__ import annotations

import atexit
import ctypes
import importlib
import json
import os
import resource
import runpy
import sys
import traceback

from evaluator.isolation_init import keep_affinity


def target(argv: list[str]) -> tuple[str, str, list[str]]:
    """("-m", module, args) or ("-c", code, args); ValueError for what a fork cannot run."""
    if len(argv) < 3 or argv[1] not in ("-m", "-c"):
        raise ValueError(f"only `python -m MODULE` and `python -c CODE` players can be forked, not {argv[:2]}")
    if os.path.realpath(argv[0]) != os.path.realpath(sys.executable):
        raise ValueError(f"a forked player runs in {sys.executable}, not {argv[0]}")
    return argv[1], argv[2], argv[3:]


PR_SET_NAME = 15
NAME_PREFIX = "player-"  # a forked player's name (/proc/PID/comm): its index in the sandbox, the rank for the evaluator's


def player_index(pid: int) -> int | None:
    """A forked player's index from its name, or None. Its /proc/PID/environ shows the fork server's
    environment, not the one it runs with (that block is fixed at exec), so tools find the rank here.
    A player can rename itself: the judge relies on none of this, only diagnostics and tests do."""
    try:
        with open(f"/proc/{pid}/comm") as f:
            name = f.read().strip()
    except OSError:
        return None
    return int(name[len(NAME_PREFIX):]) if name.startswith(NAME_PREFIX) and name[len(NAME_PREFIX):].isdigit() else None


def become(player: dict, index: int) -> None:
    """In the child: the process its own interpreter would have been."""
    os.setsid()
    ctypes.CDLL(None).prctl(PR_SET_NAME, f"{NAME_PREFIX}{index}".encode(), 0, 0, 0)
    os.dup2(player["log_fd"], 1)
    os.dup2(player["log_fd"], 2)
    low = 3  # everything else closes: the other players' fds and logs, the pids pipe
    for fd in sorted(set(player["fds"])):
        os.closerange(low, fd)
        low = fd + 1
    os.closerange(low, resource.getrlimit(resource.RLIMIT_NOFILE)[0])
    os.environ.clear()
    os.environ.update(player["env"])
    if player["cpus"]:
        keep_affinity(player["cpus"])  # as an exec'd player (evaluator/isolation_init.py)


def run(kind: str, what: str, args: list[str]) -> int:
    """Runs the player as its interpreter would; returns the exit status it would have had."""
    try:
        if kind == "-m":
            sys.argv = [what, *args]  # runpy puts the module's file name first
            runpy.run_module(what, run_name="__main__", alter_sys=True)
        else:
            sys.argv = ["-c", *args]
            exec(compile(what, "<string>", "exec"), {"__name__": "__main__", "__builtins__": __builtins__})
        status = 0
    except SystemExit as exc:
        if exc.code is None or isinstance(exc.code, int):
            status = exc.code or 0
        else:
            print(exc.code, file=sys.stderr)
            status = 1
    except BaseException as exc:  # noqa: BLE001 - as the interpreter does: print it and exit 1
        traceback.print_exception(type(exc), exc, exc.__traceback__.tb_next)  # from the player's own frames
        status = 1
    try:
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
    except BaseException:  # noqa: BLE001
        pass
    return status


def main(argv: list[str]) -> None:
    spec = json.loads(argv[0])
    pids_fd = spec["pids_fd"]
    for name in spec["preload"]:
        importlib.import_module(name)
    sys.stdout.flush()
    sys.stderr.flush()
    for index, player in enumerate(spec["players"]):
        try:
            kind, what, args = target(player["argv"])
        except ValueError as exc:
            os.write(pids_fd, (json.dumps({"player": index, "error": str(exc)}) + "\n").encode())
            continue
        pid = os.fork()
        if pid == 0:
            try:
                become(player, index)
            except BaseException:  # noqa: BLE001 - never return into the loop
                traceback.print_exc()
                os._exit(127)
            os._exit(run(kind, what, args))
        os.write(pids_fd, (json.dumps({"player": index, "pid": pid}) + "\n").encode())
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv[1:])
