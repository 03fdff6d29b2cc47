"""Starting and stopping the judges' processes: own session and process group, minimal
environment, resource limits, and a kill that leaves nothing behind (descendants that left the
group too); the environments of judges and players. Players run in evaluator/isolation.py's
sandboxes."""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from evaluator.isolation_init import limit_resources, process_tree
from evaluator.results import Mode

REPO_ROOT = Path(__file__).resolve().parent.parent

# Passed through from the evaluator's environment when set: what CUDA, compilers and NCCL need,
# and the SIMD level PyTorch's CPU kernels may use.
PASSTHROUGH = (
    "PATH", "LANG", "LC_ALL", "TZ", "CUDA_VISIBLE_DEVICES", "CUDA_HOME", "CUDA_PATH", "LD_LIBRARY_PATH",
    "CC", "CXX", "TORCH_CUDA_ARCH_LIST", "NCCL_DEBUG", "NCCL_SOCKET_IFNAME", "NCCL_P2P_DISABLE", "TMPDIR",
    "ATEN_CPU_CAPABILITY",
)
# NVLink multicast stays off in every process we start (it can take a shared host's GPUs down).
NO_MULTICAST = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
PR_SET_CHILD_SUBREAPER = 36
# A player's C allocator keeps freed memory for reuse instead of handing it back to the system (up
# to its largest threshold, 32 MiB per block): on the CPU, outputs and temporaries otherwise come
# as fresh pages every call, and the page faults' cost, which varies with the host's state,
# swamped the calls (identical code read 0.58x and 0.63x on a 2-core host without this, 0.95x and
# 1.00x with it; bench/NOTES.md).
KEEP_FREED_MEMORY = {"MALLOC_MMAP_THRESHOLD_": str(32 << 20), "MALLOC_TRIM_THRESHOLD_": str(1 << 40)}


def _base_environment(rank: int, world_size: int, home: Path) -> dict[str, str]:
    env = {k: os.environ[k] for k in PASSTHROUGH if k in os.environ}
    env.update(NO_MULTICAST)
    env.update(
        HOME=str(home),
        PYTHONPATH=str(REPO_ROOT),
        PYTHONUNBUFFERED="1",
        PYTHONDONTWRITEBYTECODE="1",
        RANK=str(rank),
        LOCAL_RANK=str(rank),
        WORLD_SIZE=str(world_size),
        LOCAL_WORLD_SIZE=str(world_size),
        # Several ranks on one CPU would otherwise each start a thread per core.
        OMP_NUM_THREADS="1",
        MKL_NUM_THREADS="1",
    )
    return env


def rank_environment(rank: int, world_size: int, mode: str, workdir: Path) -> dict[str, str]:
    """A judge's environment: nothing secret of the caller's."""
    return _base_environment(rank, world_size, workdir)


def player_environment(rank: int, world_size: int, mode: str, home: Path, build_dir: Path) -> dict[str, str]:
    """A player's environment: where its builds go, and what symmetric memory needs."""
    env = _base_environment(rank, world_size, home)
    env.pop("TMPDIR", None)  # a player's temporary files stay in its own /tmp
    env.update(TORCH_EXTENSIONS_DIR=str(build_dir / "torch_extensions"), TRITON_CACHE_DIR=str(build_dir / "triton"))
    # The ranks of one side meet over loopback, the only interface of their network namespace
    # (gloo would otherwise bind the address the host name resolves to, absent there).
    env.update(GLOO_SOCKET_IFNAME="lo", NCCL_SOCKET_IFNAME="lo")
    env.update(KEEP_FREED_MEMORY)
    if mode == Mode.SHARED_GPU:
        # Lets symmetric-memory rendezvous accept several ranks on one device.
        env["TORCH_SYMM_MEM_ALLOW_OVERLAPPING_DEVICES"] = "1"
    return env


def spawn_rank(
    rank: int,
    world_size: int,
    args: list[str],
    *,
    env: dict[str, str],
    cwd: Path,
    log_path: Path,
    pass_fds: tuple[int, ...],
    cpus: tuple[int, ...] = (),
) -> subprocess.Popen:
    """Each rank leads a new session and process group (a group cannot span sessions). `cpus`:
    the CPUs the judge may run on (evaluator/placement.py); empty: any."""

    def before_exec() -> None:
        if cpus:
            os.sched_setaffinity(0, cpus)
        limit_resources()  # the players' limits, for the judges too

    log = open(log_path, "wb")
    try:
        return subprocess.Popen(
            [sys.executable, "-m", "evaluator.rank", *args],
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            pass_fds=pass_fds,
            start_new_session=True,
            preexec_fn=before_exec,
        )
    finally:
        log.close()


def descendants(pids: list[int]) -> set[int]:
    if not os.path.isdir("/proc"):
        return set()
    tree = process_tree()
    found: set[int] = set()
    stack = list(pids)
    while stack:
        for child in tree.get(stack.pop(), []):
            if child not in found:
                found.add(child)
                stack.append(child)
    return found


def become_subreaper() -> None:
    """Orphans of our descendants (a daemonized process of a solution) are re-parented to us rather
    than to init, so `descendants` still finds them."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def kill_all(procs: list[subprocess.Popen], baseline: set[int]) -> None:
    """SIGKILL the ranks' process groups and every process that descends from us and did not exist before
    the evaluation (`baseline`), also ones that started their own session, then reap them."""
    pids = [p.pid for p in procs]
    strays = (descendants([os.getpid()]) | descendants(pids)) - baseline
    for pgid in pids:
        try:
            os.killpg(pgid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    for pid in [*pids, *strays]:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    deadline = time.monotonic() + 10
    for p in procs:
        try:
            p.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass
    # Reap the strays that were re-parented to us, or they linger as zombies.
    pending = strays - set(pids)
    while pending and time.monotonic() < deadline:
        for pid in list(pending):
            try:
                if os.waitpid(pid, os.WNOHANG)[0]:
                    pending.discard(pid)
            except ChildProcessError:
                pending.discard(pid)  # not our child: its own parent reaps it
        if pending:
            time.sleep(0.01)
