"""The sandbox that untrusted player processes run in (docs/sandbox.md). The players of one
evaluation side share one set of pid, network, mount and IPC namespaces, one private /tmp and
/dev/shm, and see a whitelist of the host's file system, read-only except their writable paths.
Their pid 1 is evaluator/isolation_init.py. Torch-free: the judge's parent process imports it."""

from __future__ import annotations

import functools
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from evaluator.isolation_init import kill_descendants, process_tree

INIT = Path(__file__).with_name("isolation_init.py")
# Seen read-only at their own paths when they exist (CUDA toolkits live in /opt and /usr/local).
SYSTEM_READONLY = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt", "/usr/local", "/sys")
# Inside those, hidden: uid 0 reads root-owned files by their mode bits alone. The GPU workers'
# broker credentials are in /etc/pkb (deploy/). /sys: firmware tables, debug and tracing file
# systems, BPF objects and the CPUs' energy counters (a side channel).
MASKED = (
    "/etc/shadow", "/etc/shadow-", "/etc/gshadow", "/etc/gshadow-", "/etc/sudoers", "/etc/sudoers.d",
    "/etc/ssh", "/etc/ssl/private", "/etc/security/opasswd", "/etc/pkb", "/etc/credstore",
    "/etc/credstore.encrypted", "/etc/docker", "/etc/wireguard", "/etc/ipsec.secrets", "/etc/ppp",
    "/etc/NetworkManager/system-connections",
    "/sys/firmware", "/sys/kernel/debug", "/sys/kernel/tracing", "/sys/kernel/security", "/sys/fs/bpf",
    "/sys/devices/virtual/powercap",
)
RESERVED = ("/", "/tmp", "/dev", "/proc")  # built by isolation_init itself
HOME = "/tmp/home"  # created in every isolated sandbox's private /tmp: what callers should give as HOME
START_TIMEOUT = 30.0
MAX_HANDED_FDS = 250  # one SCM_RIGHTS message carries at most 253 (the kernel's SCM_MAX_FD)
KILL_TIMEOUT = 10.0
TMPFS_ENV = "PKB_SANDBOX_TMPFS_MIB"
DEFAULT_TMPFS_BYTES = 4 << 30


class SandboxUnavailable(Exception):
    """The sandbox could not be set up on this host."""


@dataclass
class PlayerSpec:
    argv: list[str]  # e.g. [sys.executable, "-m", "evaluator.player"]
    env: dict[str, str]  # the complete environment of the player, passed through unchanged
    fds: tuple[int, ...]  # fds open in the parent that this player inherits, at the same numbers
    log_path: Path  # the player's stdout and stderr (created here, outside the sandbox)
    cpus: tuple[int, ...] = ()  # the CPUs it may run on (evaluator/placement.py); empty: any


@dataclass
class SandboxSpec:
    readonly: list[Path]  # extra paths visible read-only (the repository's evaluator/ and tasks/, a checkout)
    writable: list[Path]  # paths visible read-write at the same path (a per-submission build directory)
    cwd: Path  # the players' working directory: inside `writable` or /tmp (the sandbox's own)
    isolate: bool = True  # False: same process tree and limits, no namespaces (a user judging their own file)
    # Modules to import once and fork every player from (evaluator/forkserver.py), instead of each
    # player starting its own interpreter; None: one interpreter each. Forking needs every player's
    # argv to be `python -m MODULE ...` or `python -c CODE ...`, and evaluator/ visible and on
    # PYTHONPATH inside the sandbox (in `readonly`).
    preload: tuple[str, ...] | None = None
    # Every player (or the fork server) started at fixed addresses (isolation_init.fix_layout), so
    # that both sides' processes lay identical code out alike.
    fixed_layout: bool = False


def _within(path: str, parent: str) -> bool:
    return path == parent or path.startswith(parent.rstrip("/") + "/")


def _symlinks_on(path: str, depth: int = 0) -> dict[str, str]:
    """Each symlink met while resolving `path` (link -> its target): the sandbox binds real paths and
    recreates these, so that `path` resolves there as it does here (e.g. /lib64 -> usr/lib64)."""
    links: dict[str, str] = {}
    current = "/"
    for part in Path(path).parts[1:]:
        candidate = os.path.join(current, part)
        if os.path.islink(candidate) and depth < 40:
            target = os.readlink(candidate)
            links[candidate] = target
            links.update(_symlinks_on(os.path.normpath(os.path.join(current, target)), depth + 1))
            candidate = os.path.realpath(candidate)
        current = candidate
    return links


def private_tmpfs_bytes() -> int:
    """What the sandbox's /tmp and /dev/shm may each hold: PKB_SANDBOX_TMPFS_MIB, or an eighth of
    the host's memory up to 4 GiB (NCCL's and the players' own files take megabytes)."""
    setting = os.environ.get(TMPFS_ENV)
    if setting:
        return int(setting) << 20
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return min(DEFAULT_TMPFS_BYTES, total // 8)


def _plan(spec: SandboxSpec) -> dict:
    """What isolation_init mounts: binds (real path, writable) parents first, symlinks, masks, and the
    directories to create in the private /tmp."""
    python = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    requested = [(p, False) for p in (*SYSTEM_READONLY, *sorted(python)) if os.path.lexists(p)]
    for path in (*spec.readonly, *spec.writable):
        if not os.path.exists(path):
            raise FileNotFoundError(f"sandbox path {path} does not exist")
        if any(os.path.realpath(path) == r for r in RESERVED) or _within(os.path.realpath(path), "/dev") \
                or _within(os.path.realpath(path), "/proc"):
            raise ValueError(f"sandbox path {path} is built by the sandbox itself")
    requested += [(str(p), False) for p in spec.readonly] + [(str(p), True) for p in spec.writable]
    links: dict[str, str] = {}
    binds: dict[str, bool] = {}
    for path, writable in requested:
        links.update(_symlinks_on(os.path.abspath(path)))
        real = os.path.realpath(path)
        binds[real] = binds.get(real, False) or writable
    rw = [p for p, w in binds.items() if w]
    # A read-only path inside another read-only one is visible already (unless a writable one lies between).
    kept = [(p, w) for p, w in binds.items()
            if w or any(_within(p, r) for r in rw) or not any(q != p and _within(p, q) for q in binds)]
    kept.sort(key=lambda b: len(Path(b[0]).parts))  # parents first: a deeper bind lands on top
    cwd = os.path.abspath(spec.cwd)
    if not any(_within(os.path.realpath(cwd), r) for r in rw) and not _within(cwd, "/tmp"):
        raise ValueError(f"the players' cwd {cwd} is neither in a writable path nor in /tmp")
    mkdirs = [HOME] + ([cwd] if _within(cwd, "/tmp") and not any(_within(cwd, r) for r in rw) else [])
    return {"binds": kept, "links": sorted(links.items()), "masks": list(MASKED), "mkdirs": mkdirs,
            "tmpfs_bytes": private_tmpfs_bytes()}


class Sandbox:
    """The running sandbox. `host_pid` is its outermost process in our pid namespace (`unshare`, or
    isolation_init when not isolated)."""

    def __init__(self, proc: subprocess.Popen, status_fd: int, count: int, isolate: bool, stderr) -> None:
        self.host_pid = proc.pid
        self.errors: dict[int, str] = {}  # player index -> why it could not be started (status 127)
        self._proc, self._fd, self._isolate, self._stderr = proc, status_fd, isolate, stderr
        self._exits: dict[int, int | None] = dict.fromkeys(range(count))
        self._buffer = b""
        self._started = False
        self._setup_error: str | None = None
        self._init_pidfd: int | None = None
        os.set_blocking(status_fd, False)

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.kill()

    def _read(self, timeout: float = 0.0) -> None:
        """Take in what isolation_init reported, waiting up to `timeout` for the first bytes."""
        if self._fd < 0:
            return
        if not select.select([self._fd], [], [], max(0.0, timeout))[0]:
            return
        while True:
            try:
                chunk = os.read(self._fd, 1 << 16)
            except BlockingIOError:
                break
            if not chunk:  # isolation_init and unshare have exited
                os.close(self._fd)
                self._fd = -1
                break
            self._buffer += chunk
        *lines, self._buffer = self._buffer.split(b"\n")
        for line in lines:
            message = json.loads(line)
            if "player" in message:
                self._exits[message["player"]] = message["status"]
                if "error" in message:
                    self.errors[message["player"]] = message["error"]
            elif "error" in message:
                self._setup_error = message["error"]
            elif message.get("started"):
                self._started = True

    def _await_start(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        while not self._started and self._setup_error is None and self._fd >= 0 and time.monotonic() < deadline:
            self._read(deadline - time.monotonic())
        if self._started:
            if self._isolate:
                self._open_init()
            return
        self._proc.kill()  # unshare's --kill-child takes pid 1 along
        self._proc.wait()
        self._stderr.seek(0)
        said = self._stderr.read().decode(errors="replace").strip().splitlines()
        self.kill()
        reason = self._setup_error or (said[-1] if said else None) or (
            "sandbox setup timed out" if time.monotonic() >= deadline else "sandbox exited during setup")
        raise SandboxUnavailable(reason)

    def _open_init(self) -> None:
        """A pidfd on the namespace's pid 1 (unshare's child): kill() signals it without any risk of
        hitting a recycled pid."""
        for pid in process_tree().get(self.host_pid, []):
            try:
                fd = os.pidfd_open(pid)
            except OSError:
                return
            if pid in process_tree().get(self.host_pid, []):  # still unshare's child: the pidfd is on it
                self._init_pidfd = fd
                return
            os.close(fd)

    def exits(self) -> dict[int, int | None]:
        """Player index -> exit status (negative: the signal) once known, None while running. Players
        that the end of the sandbox took down without a report (kill()) read -SIGKILL."""
        self._read()
        if self._fd < 0 and self._proc.poll() is not None:
            for index, status in self._exits.items():
                if status is None:
                    self._exits[index] = -signal.SIGKILL
        return dict(self._exits)

    def alive(self) -> bool:
        """Whether any process of the sandbox still runs: its pid 1 outlives them all."""
        return self._proc.poll() is None

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until every process of the sandbox has exited (all players did); False on timeout."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while self._fd >= 0:
            left = 1.0 if deadline is None else deadline - time.monotonic()
            if left <= 0:
                return False
            self._read(left)
        try:
            self._proc.wait(None if deadline is None else max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            return False
        self._release()
        return True

    def kill(self) -> None:
        """SIGKILL every process of the sandbox, daemons that left their session included, and reap
        the outermost process. Idempotent."""
        if self._proc.poll() is None:
            if self._isolate and self._init_pidfd is not None:
                # pid 1 dies, so the kernel kills the whole namespace; unshare, waiting for pid 1, exits
                # once the namespace is empty.
                try:
                    signal.pidfd_send_signal(self._init_pidfd, signal.SIGKILL)
                except ProcessLookupError:
                    pass  # pid 1 has exited already (the last player did); unshare follows
            elif self._isolate:
                self._proc.kill()  # no pidfd (not started yet, or an old kernel): --kill-child takes pid 1 along
            else:
                # Safe from pid reuse: isolation_init is our child, and its pid stays taken until we reap it.
                kill_descendants(self.host_pid, KILL_TIMEOUT)
                self._proc.kill()
            try:
                self._proc.wait(KILL_TIMEOUT)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        while self._fd >= 0:
            self._read(1.0)
        self._release()

    def _release(self) -> None:
        if self._init_pidfd is not None:
            os.close(self._init_pidfd)
            self._init_pidfd = None
        self._stderr.close()


def start(players: list[PlayerSpec], spec: SandboxSpec) -> Sandbox:
    """Start one sandbox running `players`; returns once every player was started (see Sandbox.errors
    for those that could not be). Raises SandboxUnavailable when the sandbox cannot be set up."""
    if not players:
        raise ValueError("a sandbox needs at least one player")
    for player in players:
        if any(fd < 3 for fd in player.fds):
            raise ValueError("a player's fds 0, 1 and 2 are /dev/null and its log")
    if sum(len(p.fds) + 1 for p in players) > MAX_HANDED_FDS:
        raise ValueError(f"a sandbox hands at most {MAX_HANDED_FDS} fds and logs to its players")
    plan, prefix = None, []
    if spec.isolate:
        plan = _plan(spec)
        unshare = shutil.which("unshare")
        if unshare is None:
            raise SandboxUnavailable("util-linux unshare not found")
        flags = ["--pid", "--net", "--mount", "--ipc", "--fork", "--kill-child", "--mount-proc"]
        if os.geteuid() != 0:
            # Keeps the uid, which CUDA IPC with the judge needs; --keep-caps: isolation_init, no longer uid 0
            # inside, still needs its capabilities in the new user namespace to mount.
            flags += ["--user", "--map-current-user", "--keep-caps"]
        prefix = [unshare, *flags, "--"]
    logs: list[int] = []
    try:
        for p in players:
            logs.append(os.open(p.log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644))
    except OSError:
        for fd in logs:
            os.close(fd)
        raise
    status_r, status_w = os.pipe()
    # The players' fds and logs reach isolation_init over a socket (SCM_RIGHTS), not by inheritance:
    # `unshare` waits outside for its child, and any fd it inherited would stay open in it, so a
    # judge would never see EOF when its player dies.
    config_parent, config_child = socket.socketpair()
    handed = [fd for p in players for fd in p.fds] + logs
    config = {
        "isolate": spec.isolate,
        "plan": plan,
        "cwd": os.path.abspath(spec.cwd),
        "status_fd": status_w,
        "players": [{"argv": p.argv, "env": p.env, "fds": list(p.fds), "cpus": list(p.cpus)} for p in players],
        "preload": None if spec.preload is None else list(spec.preload),
        "fixed_layout": spec.fixed_layout,
    }
    argv = [*prefix, sys.executable, "-I", "-S", str(INIT), str(config_child.fileno())]
    # Where the players are placed, the sandbox's own processes run on their CPUs too: the judge
    # then finds every process of the sandbox within the placement unless a player widened it.
    placed = set().union(*(p.cpus for p in players)) if all(p.cpus for p in players) else None
    stderr = tempfile.TemporaryFile()  # unshare's and isolation_init's own complaints, for SandboxUnavailable
    try:
        proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr, cwd="/",
            env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}, pass_fds=(status_w, config_child.fileno()),
            start_new_session=True, preexec_fn=(lambda: os.sched_setaffinity(0, placed)) if placed else None,
        )
    except BaseException:
        os.close(status_r)
        config_parent.close()
        for fd in logs:
            os.close(fd)
        raise
    finally:
        os.close(status_w)
        config_child.close()
    try:
        with config_parent:
            body = json.dumps(config).encode()
            socket.send_fds(config_parent, [len(body).to_bytes(8, "little")], handed)
            config_parent.sendall(body)
    except OSError:
        pass  # it died before reading: _await_start says why
    finally:
        for fd in logs:
            close_quietly(fd)
    sandbox = Sandbox(proc, status_r, len(players), spec.isolate, stderr)
    sandbox._await_start()
    return sandbox


def close_quietly(fd: int) -> None:
    try:
        os.close(fd)
    except OSError:
        pass


@functools.cache
def probe() -> str | None:
    """None when a sandbox can be set up on this host, else a one-line reason (cached per process)."""
    if sys.platform != "linux":
        return "the sandbox needs Linux namespaces"
    try:
        sandbox = start([PlayerSpec([sys.executable, "-S", "-c", ""], {}, (), Path(os.devnull))],
                        SandboxSpec([], [], Path("/tmp")))
    except (SandboxUnavailable, OSError) as e:
        return f"{type(e).__name__}: {e}".replace("\n", " ")
    with sandbox:
        if not sandbox.wait(START_TIMEOUT):
            return "a trivial player did not finish in the sandbox"
        status = sandbox.exits()[0]
    if status != 0:
        return f"a trivial player exited with status {status} in the sandbox {sandbox.errors.get(0, '')}".strip()
    return None
