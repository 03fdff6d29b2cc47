"""Pid 1 of a player sandbox (evaluator/isolation.py starts it; docs/sandbox.md says what it
isolates). It builds the sandbox's file system from the plan it is given, brings loopback up, starts
each player without privileges (each in an interpreter of its own, or all forked from one fork
server: evaluator/forkserver.py), reaps every process and writes one JSON line per player exit on
the status pipe. Standard library only, and it imports nothing from the repository: it runs with
`python -I -S` before the sandbox's file system exists."""

from __future__ import annotations

import ctypes
import fcntl
import json
import os
import re
import resource
import signal
import socket
import struct
import sys
import time
from collections.abc import Iterable

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT = 1, 2, 4, 8, 32
MS_NOATIME, MS_NODIRATIME, MS_BIND, MS_REC, MS_PRIVATE, MS_RELATIME = 1 << 10, 1 << 11, 1 << 12, 1 << 14, 1 << 18, 1 << 21
MNT_DETACH = 2
# A remount inside a user namespace must keep the flags the original mount was locked with.
STATVFS_TO_MS = {os.ST_NOSUID: MS_NOSUID, os.ST_NODEV: MS_NODEV, os.ST_NOEXEC: MS_NOEXEC,
                 os.ST_NOATIME: MS_NOATIME, os.ST_NODIRATIME: MS_NODIRATIME, os.ST_RELATIME: MS_RELATIME}
SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41}
PR_CAPBSET_DROP, PR_SET_CHILD_SUBREAPER, PR_SET_NO_NEW_PRIVS, PR_CAP_AMBIENT = 24, 36, 38, 47
PR_CAP_AMBIENT_CLEAR_ALL = 4
LINUX_CAPABILITY_VERSION_3 = 0x20080522
SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1
FILE_SIZE_LIMIT = 4 << 30  # bytes one player may write into one file (builds are tens of MB)
OOM_SCORE_ADJ_MAX = 1000

BASE, NEW, OLD = "/tmp", "/newroot", "/oldroot"  # BASE: where the sandbox is assembled, in our own mount namespace
# Device nodes the players get. Not all of /dev: uid 0 opens a root-owned block device (the host's
# disks) by its mode bits alone, without any capability.
# The GPUs' are /dev/nvidia0.., nvidiactl, nvidia-uvm, nvidia-uvm-tools, nvidia-caps/ (MIG).
DEVICES = ("null", "zero", "full", "random", "urandom", "tty")
# As container runtimes do: uid 0 may write sysctls (e.g. kernel.core_pattern, whose helper runs on
# the host) and /proc/sysrq-trigger by mode bits alone, so these are read-only, and these leak the host.
PROC_READONLY = ("/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus", "/proc/fs")
PROC_MASKED = ("/proc/kcore", "/proc/keys", "/proc/timer_list", "/proc/sched_debug", "/proc/latency_stats",
               "/proc/timer_stats", "/proc/acpi", "/proc/scsi", "/proc/asound")

libc = ctypes.CDLL(None, use_errno=True)


def _check(ret: int, what: str) -> None:
    if ret != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _c(s: str | None) -> bytes | None:
    return None if s is None else s.encode()


def mount(source: str | None, target: str, fstype: str | None = None, flags: int = 0, data: str | None = None) -> None:
    _check(libc.mount(_c(source), _c(target), _c(fstype), ctypes.c_ulong(flags), _c(data)),
           f"mount {source or ''} on {target}")


def _mount_points_under(path: str) -> list[str]:
    with open(NEW + "/proc/self/mountinfo") as f:
        points = [re.sub(r"\\([0-7]{3})", lambda m: chr(int(m[1], 8)), line.split()[4]) for line in f]
    return [p for p in points if p == path or p.startswith(path.rstrip("/") + "/")]


def restrict(path: str, flags: int) -> None:
    """Remount `path` and every mount below it (a recursive bind brings submounts along, and a
    remount changes one mount only) with `flags` added."""
    for point in _mount_points_under(path):
        kept = sum(ms for st, ms in STATVFS_TO_MS.items() if os.statvfs(point).f_flag & st)
        mount(None, point, None, MS_BIND | MS_REMOUNT | flags | kept)


def _make_target(source: str, target: str) -> None:
    if os.path.isdir(source):
        os.makedirs(target, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        if not os.path.lexists(target):
            open(target, "w").close()


def bind(path: str, *, writable: bool, flags: int = MS_NOSUID | MS_NODEV) -> None:
    """The host's `path` at the same path in the new root."""
    source, target = OLD + path, NEW + path
    _make_target(source, target)
    mount(source, target, None, MS_BIND | MS_REC)  # recursive: a user namespace refuses to split locked submounts
    restrict(target, flags | (0 if writable else MS_RDONLY))


def tmpfs(path: str, mode: int, flags: int = MS_NOSUID | MS_NODEV, size: int | None = None) -> None:
    """A tmpfs at `path`; `size`: the bytes its files may take (what is written there is memory)."""
    os.makedirs(path, exist_ok=True)
    mount("tmpfs", path, "tmpfs", flags, f"mode={mode:o}" + (f",size={size}" if size else ""))


def mask(path: str) -> None:
    """Hide a file behind /dev/null and a directory behind an empty read-only tmpfs."""
    target = NEW + path
    if os.path.isdir(target) and not os.path.islink(target):
        mount("tmpfs", target, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV, "mode=755")
    elif os.path.exists(target):
        mount(OLD + "/dev/null", target, None, MS_BIND)
        mount(None, target, None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID)  # not nodev: it is /dev/null


def build_dev(writable_bytes: int | None) -> None:
    tmpfs(NEW + "/dev", 0o755, MS_NOSUID)  # no nodev: the device nodes bound into it must work
    names = [n for n in os.listdir(OLD + "/dev") if n in DEVICES or n.startswith("nvidia")]
    for name in sorted(names):
        bind("/dev/" + name, writable=True, flags=MS_NOSUID)
    for name, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"), ("stdout", "/proc/self/fd/1"),
                         ("stderr", "/proc/self/fd/2")):
        os.symlink(target, f"{NEW}/dev/{name}")
    # Private to the sandbox, shared by its players (NCCL's and PyTorch's shared memory segments).
    tmpfs(NEW + "/dev/shm", 0o1777, size=writable_bytes)
    mount(None, NEW + "/dev", None, MS_REMOUNT | MS_RDONLY | MS_NOSUID)


def build_proc() -> None:
    # The pid namespace's own /proc: only the sandbox's processes.
    os.makedirs(NEW + "/proc")
    mount("proc", NEW + "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    for path in PROC_READONLY:
        if os.path.exists(NEW + path):
            mount(NEW + path, NEW + path, None, MS_BIND | MS_REC)
            restrict(NEW + path, MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC)
    for path in PROC_MASKED:
        mask(path)


def pivot_root(new_root: str, put_old: str) -> None:
    number = SYS_PIVOT_ROOT.get(os.uname().machine)
    if number is None:
        raise OSError(f"pivot_root: no syscall number known for {os.uname().machine}")
    _check(libc.syscall(ctypes.c_long(number), _c(new_root), _c(put_old)), f"pivot_root {new_root}")


def build_root(plan: dict) -> None:
    """Assemble the new root under BASE with the host's root at OLD, then make it the root and detach
    the host's: only what the plan (a whitelist) names stays reachable."""
    mount(None, "/", None, MS_REC | MS_PRIVATE)  # nothing we mount may propagate back to the host
    tmpfs(BASE, 0o755)
    os.mkdir(BASE + OLD)
    pivot_root(BASE, BASE + OLD)
    os.chdir("/")
    tmpfs(NEW, 0o755)
    build_proc()
    # Private to the sandbox, shared by its players (symmetric-memory sockets). Each capped: its
    # files are the host's memory until the sandbox ends, whoever the OOM killer ends first.
    tmpfs(NEW + "/tmp", 0o1777, size=plan.get("tmpfs_bytes"))
    build_dev(plan.get("tmpfs_bytes"))
    for path, writable in plan["binds"]:
        bind(path, writable=writable)
    for path in plan["masks"]:
        mask(path)
    for path, target in plan["links"]:
        if not os.path.lexists(NEW + path):
            os.makedirs(os.path.dirname(NEW + path), exist_ok=True)
            os.symlink(target, NEW + path)
    for path in plan["mkdirs"]:  # the players' HOME and cwd when they lie in the private /tmp
        os.makedirs(NEW + path, mode=0o700, exist_ok=True)
    mount(None, NEW, None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)
    # Enter the new root; the old one (BASE, with the host's root below it) ends up stacked on it,
    # detached at once.
    os.chdir(NEW)
    pivot_root(".", ".")
    _check(libc.umount2(b".", MNT_DETACH), "detach the old root")
    os.chdir("/")


def loopback_up() -> None:
    """A new network namespace's `lo` is down, and gloo's rendezvous needs it."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        request = struct.pack("16sH22x", b"lo", 0)
        flags = struct.unpack("16sH22x", fcntl.ioctl(s, SIOCGIFFLAGS, request))[1]
        fcntl.ioctl(s, SIOCSIFFLAGS, struct.pack("16sH22x", b"lo", flags | IFF_UP))


def first_for_the_oom_killer() -> None:
    """The sandbox's processes (inherited by every player) are the first the kernel's OOM killer
    ends, before the judges, the worker or the platform's database. Raising the score needs no
    privilege; lowering it again needs CAP_SYS_RESOURCE, which no player keeps (drop_privileges)."""
    with open("/proc/self/oom_score_adj", "w") as f:
        f.write(str(OOM_SCORE_ADJ_MAX))


def limit_resources() -> None:
    # No RLIMIT_AS: CUDA reserves far more address space than it uses. No RLIMIT_NPROC: uid 0 is
    # exempt from it, and for another uid it counts that user's processes outside the sandbox too.
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_SIZE_LIMIT, FILE_SIZE_LIMIT))


def drop_privileges() -> None:
    """Keep the uid (CUDA IPC with the judge needs the same one) but no capability survives exec:
    an empty bounding set, no inheritable or ambient capability, and no_new_privs (no setuid or
    file-capability binary can give any back)."""
    libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)  # fails only on kernels without ambient sets
    cap = 0
    while libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) == 0:
        cap += 1  # EINVAL past the last capability; EPERM when we hold none (another uid, not isolated)
    header = (ctypes.c_uint32 * 2)(LINUX_CAPABILITY_VERSION_3, 0)
    _check(libc.capset(header, (ctypes.c_uint32 * 6)()), "capset")
    _check(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")


# personality(2): the flag that makes the next exec lay out the stack, heap and mappings at fixed
# addresses (what `setarch -R` sets), and the query that reads the current persona.
ADDR_NO_RANDOMIZE = 0x0040000
PERSONALITY_QUERY = 0xFFFFFFFF


def fix_layout() -> bool:
    """Whatever this process execs from now on starts at the same addresses every time; False where
    the host forbids it (a container's seccomp profile may), which leaves the layout random. Two
    players of identical code then lay their memory out alike: with random layouts, two fresh
    processes time identical host-bound code apart by about 1.5% (sd over pairs of processes) for
    their whole life, as their caches collide differently; at fixed addresses by about 1.1%
    (bench/NOTES.md, "Process offsets"). A player loses nothing by it: its sandbox, not its
    layout, keeps a solution from the judge and the other side."""
    current = libc.personality(PERSONALITY_QUERY)
    return current != -1 and libc.personality(current | ADDR_NO_RANDOMIZE) != -1


def layout() -> str | None:
    """Where this process started: "fixed" or "random" addresses (None if the host will not say)."""
    current = libc.personality(PERSONALITY_QUERY)
    return None if current == -1 else "fixed" if current & ADDR_NO_RANDOMIZE else "random"


# A seccomp filter that turns sched_setaffinity into a call that succeeds and does nothing, for a
# player placed on its CPUs (evaluator/placement.py): a solution cannot leave the CPU its rank's
# reference shares, and honest code that narrows its threads' CPUs (NCCL does) runs on as before.
# Per architecture, with the 32-bit (and x32) entry points a 64-bit process can also call.
AUDIT_ARCH = {"x86_64": 0xC000003E, "i386": 0x40000003, "aarch64": 0xC00000B7, "arm": 0x40000028}
SCHED_SETAFFINITY = {"x86_64": (203, 0x40000000 | 203), "i386": (241,), "aarch64": (122,), "arm": (241,)}
PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 22, 2
BPF_LD_W_ABS, BPF_JEQ_K, BPF_RET_K = 0x20, 0x15, 0x06
SECCOMP_RET_ALLOW, SECCOMP_RET_ERRNO = 0x7FFF0000, 0x00050000  # ERRNO with errno 0: returns 0


def affinity_filter() -> list[tuple[int, int, int, int]]:
    """The filter's instructions (code, jt, jf, k): per architecture, its sched_setaffinity numbers
    jump to the no-op; everything else is allowed."""
    program: list[tuple] = [("ld", 4)]  # the architecture (seccomp_data.arch)
    for arch, numbers in SCHED_SETAFFINITY.items():
        program.append(("jeq", AUDIT_ARCH[arch], None, "next"))  # not this one: the next test, arch still loaded
        program.append(("ld", 0))  # the syscall number (seccomp_data.nr)
        program += [("jeq", n, "noop", "allow" if n == numbers[-1] else None) for n in numbers]
    program += [("ret", SECCOMP_RET_ALLOW), ("ret", SECCOMP_RET_ERRNO)]
    allow, noop = len(program) - 2, len(program) - 1
    arch_tests = [i for i, ins in enumerate(program) if ins[0] == "jeq" and ins[3] == "next"]
    code = []
    for at, ins in enumerate(program):
        if ins[0] != "jeq":
            code.append((BPF_LD_W_ABS if ins[0] == "ld" else BPF_RET_K, 0, 0, ins[1]))
            continue

        def offset(to: str | None, at: int = at) -> int:
            if to is None:
                return 0
            index = next((i for i in arch_tests if i > at), allow) if to == "next" else {"noop": noop, "allow": allow}[to]
            return index - at - 1

        code.append((BPF_JEQ_K, offset(ins[2]), offset(ins[3]), ins[1]))
    return code


def keep_affinity(cpus: Iterable[int]) -> None:
    """Run on `cpus` from now on: set this process's affinity, then install the filter (inherited
    by its threads, children and execs). Where the kernel refuses the filter, says so on stderr
    (the player's log) and goes on: the judge still refuses a solution found off its CPUs
    whenever it stops it (evaluator/freezer.py)."""
    os.sched_setaffinity(0, cpus)
    try:
        _install_affinity_filter()
    except OSError as exc:
        print(f"sandbox: CPU affinity left open: {exc}", file=sys.stderr, flush=True)


def _install_affinity_filter() -> None:
    class SockFilter(ctypes.Structure):
        _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8), ("k", ctypes.c_uint32)]

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(SockFilter))]

    code = affinity_filter()
    filters = (SockFilter * len(code))(*[SockFilter(*ins) for ins in code])
    prog = SockFprog(len(code), filters)
    libc = ctypes.CDLL(None, use_errno=True)
    _check(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")  # what an unprivileged filter needs
    _check(libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0), "seccomp")


def spawn(player: dict, cwd: str, fixed_layout: bool = False) -> int:
    """Fork and exec one player: its own session, stdin /dev/null, stdout and stderr to its log, its
    handed fds at the numbers it was promised (`player["fds"]`), nothing else; at fixed addresses
    with `fixed_layout`. Raises OSError when the exec fails."""
    errors_r, errors_w = os.pipe()  # close-on-exec: stays empty when exec succeeds
    pid = os.fork()
    if pid == 0:
        try:
            os.close(errors_r)
            os.setsid()
            for sig in (signal.SIGINT, signal.SIGPIPE, signal.SIGXFSZ):
                signal.signal(sig, signal.SIG_DFL)
            # Move what we keep above every number in play first, so that placing one fd at its
            # promised number never overwrites another that is still to be placed.
            high = 1 + max(3, errors_w, player["log_fd"], *player["fds"], *player["handed"])
            errors_w = fcntl.fcntl(errors_w, fcntl.F_DUPFD_CLOEXEC, high)
            log = fcntl.fcntl(player["log_fd"], fcntl.F_DUPFD, high)
            moved = [fcntl.fcntl(fd, fcntl.F_DUPFD, high) for fd in player["handed"]]
            os.dup2(os.open("/dev/null", os.O_RDONLY), 0)
            os.dup2(log, 1)
            os.dup2(log, 2)
            for source, target in zip(moved, player["fds"]):
                os.dup2(source, target)  # inheritable
            low = 3  # close everything else: the other players' fds, the status pipe, the logs
            for fd in sorted({errors_w, *player["fds"]}):
                os.closerange(low, fd)
                low = fd + 1
            os.closerange(low, resource.getrlimit(resource.RLIMIT_NOFILE)[0])
            os.chdir(cwd)
            if player.get("cpus"):
                keep_affinity(player["cpus"])
            limit_resources()
            drop_privileges()
            if fixed_layout:
                fix_layout()  # best effort: where the host forbids it, the player starts as before
            os.execvpe(player["argv"][0], player["argv"], player["env"])
        except BaseException as e:  # noqa: B036 - whatever happens, report it and never return into the parent's code
            os.write(errors_w, f"{type(e).__name__}: {e}".encode())
        os._exit(127)
    os.close(errors_w)
    with os.fdopen(errors_r, "rb") as f:
        error = f.read().decode(errors="replace")
    if error:
        os.waitpid(pid, 0)
        raise OSError(error)
    return pid


def start_fork_server(players: list[dict], preload: list[str], cwd: str, fixed_layout: bool = False) -> tuple[int, int]:
    """Start one fork server (evaluator/forkserver.py) for every player: it imports `preload` once,
    forks them and exits, and they become our children. Returns its pid and the read end of the pipe
    on which it names their pids (forked_players). Raises OSError when it cannot be started."""
    promised = [fd for p in players for fd in p["fds"]]
    first_free = max([2, *promised]) + 1
    logs_at = list(range(first_free, first_free + len(players)))
    pids_at = logs_at[-1] + 1
    spec = {"preload": preload, "pids_fd": pids_at, "players": [
        {"argv": p["argv"], "env": p["env"], "fds": p["fds"], "log_fd": log, "cpus": p.get("cpus") or []}
        for p, log in zip(players, logs_at)]}
    # The fork server runs in the interpreter and environment of the first player it can fork.
    model = next((p for p in players if p["argv"][1:2] in (["-m"], ["-c"])), players[0])
    pids_r, pids_w = os.pipe()
    server = {"argv": [model["argv"][0], "-m", "evaluator.forkserver", json.dumps(spec)], "env": model["env"],
              "fds": [*promised, *logs_at, pids_at], "log_fd": players[0]["log_fd"], "cpus": [],
              "handed": [*(h for p in players for h in p["handed"]), *(p["log_fd"] for p in players), pids_w]}
    try:
        return spawn(server, cwd, fixed_layout), pids_r  # its forks keep its layout
    except OSError:
        os.close(pids_r)
        raise
    finally:
        os.close(pids_w)


def forked_players(server_pid: int, pids_r: int, count: int) -> tuple[dict[int, int], dict[int, str]]:
    """Once the fork server has forked every player and exited: pid -> player index, and player
    index -> why it could not be started."""
    with os.fdopen(pids_r, "rb") as f:
        lines = f.read().decode(errors="replace").splitlines()
    _, status = os.waitpid(server_pid, 0)
    running: dict[int, int] = {}
    errors: dict[int, str] = {}
    for line in lines:
        message = json.loads(line)
        if "pid" in message:
            running[int(message["pid"])] = int(message["player"])
        else:
            errors[int(message["player"])] = str(message.get("error"))
    for index in set(range(count)) - set(running.values()) - set(errors):
        errors[index] = f"the fork server ended with status {exit_status(status)} before starting it (see player 0's log)"
    return running, errors


def _receive(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(min(1 << 20, size - len(data)))
        if not chunk:
            raise EOFError("the configuration ended early")
        data += chunk
    return data


def receive_config(fd: int) -> dict:
    """The plan and the players, with the fds handed over (SCM_RIGHTS): each player's, then the logs."""
    with socket.socket(fileno=fd) as sock:
        header, handed, _, _ = socket.recv_fds(sock, 8, 256)
        header += _receive(sock, 8 - len(header))
        body = _receive(sock, int.from_bytes(header, "little"))
    config = json.loads(body)
    players = config["players"]
    if len(handed) != sum(len(p["fds"]) + 1 for p in players):
        raise ValueError(f"{len(handed)} fds handed over for {len(players)} players")
    for player in players:
        player["handed"], handed = handed[: len(player["fds"])], handed[len(player["fds"]) :]
    for player, log in zip(players, handed):
        player["log_fd"] = log
    return config


def process_tree() -> dict[int, list[int]]:
    """Parent pid -> child pids, from /proc."""
    children: dict[int, list[int]] = {}
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                # Field 4 (ppid) follows the parenthesised command name, which may contain spaces.
                ppid = int(f.read().rsplit(b")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    return children


def descendants(root: int) -> set[int]:
    children = process_tree()
    found: set[int] = set()
    stack = [root]
    while stack:
        for child in children.get(stack.pop(), []):
            if child not in found:
                found.add(child)
                stack.append(child)
    return found


def kill_descendants(root: int, timeout: float = 10.0) -> None:
    """SIGKILL every descendant of `root` (kept in the tree while `root` is a child subreaper) until
    none is left; a killed process cannot fork any more, so each pass only catches newer children."""
    deadline = time.monotonic() + timeout
    while (pids := descendants(root)) and time.monotonic() < deadline:
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if root == os.getpid():
            try:
                while os.waitpid(-1, os.WNOHANG)[0]:
                    pass
            except ChildProcessError:
                pass
        time.sleep(0.005)


def exit_status(status: int) -> int:
    return -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)


def main() -> None:
    # As pid 1 of a pid namespace we only get the signals we handle: handle none (Python handles SIGINT).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    config = receive_config(int(sys.argv[1]))
    status_fd = config["status_fd"]

    def report(**message: object) -> None:
        try:
            os.write(status_fd, (json.dumps(message) + "\n").encode())
        except BrokenPipeError:
            sys.exit(1)  # the judge is gone: ending pid 1 ends the sandbox

    try:
        if config["isolate"]:
            build_root(config["plan"])
            loopback_up()
        else:
            # Orphans (a daemonized process) are re-parented to us, so kill_descendants finds them.
            _check(libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0), "subreaper")
        limit_resources()
        first_for_the_oom_killer()
    except Exception as e:
        report(error=f"sandbox setup failed: {type(e).__name__}: {e}")
        sys.exit(1)
    running: dict[int, int] = {}
    players = config["players"]
    server = None
    if config.get("preload") is not None:
        try:
            server = start_fork_server(players, config["preload"], config["cwd"], config["fixed_layout"])
        except OSError as e:
            for index in range(len(players)):
                report(player=index, status=127, error=f"cannot start player {index}: cannot start the fork server: {e}")
    else:
        for index, player in enumerate(players):
            try:
                running[spawn(player, config["cwd"], config["fixed_layout"])] = index
            except OSError as e:
                report(player=index, status=127, error=f"cannot start player {index}: {e}")
    # Only the player keeps its ends: a judge must see EOF the moment its player dies.
    for player in players:
        for fd in (player["log_fd"], *player["handed"]):
            os.close(fd)
    # Started: the judges and the other side's sandbox start while the fork server imports.
    report(started=True)
    if server is not None:
        running, errors = forked_players(*server, len(players))
        for index, error in sorted(errors.items()):
            report(player=index, status=127, error=f"cannot start player {index}: {error}")
    while running:
        try:
            pid, status = os.wait()  # also reaps orphans re-parented to us
        except ChildProcessError:
            break
        if pid in running:
            report(player=running.pop(pid), status=exit_status(status))
    if not config["isolate"]:
        kill_descendants(os.getpid())
    # Isolated: exiting as pid 1 makes the kernel kill every process left in the namespace.


if __name__ == "__main__":
    main()
