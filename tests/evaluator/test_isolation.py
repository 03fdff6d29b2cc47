"""The player sandbox (evaluator/isolation.py): what tiny Python players can and cannot see or do."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import pytest

from evaluator import isolation, isolation_init
from evaluator.forkserver import player_index
from evaluator.isolation import HOME, PlayerSpec, SandboxSpec, SandboxUnavailable, probe, start
from evaluator.isolation_init import descendants

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(probe() is not None, reason=f"no sandbox on this host: {probe()}")
ENV = {"PATH": "/usr/bin:/bin", "HOME": HOME, "PYTHONDONTWRITEBYTECODE": "1"}


def player(code: str, log: Path, fds: tuple[int, ...] = (), **env: str) -> PlayerSpec:
    return PlayerSpec([sys.executable, "-c", textwrap.dedent(code)], {**ENV, **env}, fds, log)


def run(tmp_path: Path, codes: list[str], spec: SandboxSpec | None = None, fds=None, **env: str):
    """Run one sandbox to its end; each player's status and the JSON it printed last."""
    logs = [tmp_path / f"player{i}.log" for i in range(len(codes))]
    players = [player(c, log, (fds or {}).get(i, ()), INDEX=str(i), **env) for i, (c, log) in enumerate(zip(codes, logs))]
    with start(players, spec or SandboxSpec([], [], Path(HOME))) as sandbox:
        assert sandbox.wait(30), "the sandbox did not finish"
        exits = sandbox.exits()
    outputs = []
    for log in logs:
        text = log.read_text()
        try:
            outputs.append(json.loads(text.splitlines()[-1]))
        except (IndexError, ValueError):
            outputs.append(text)  # a traceback, for the assertion's message
    return exits, outputs


def forked(tmp_path: Path, isolate: bool = True, preload: tuple[str, ...] = ("decimal",)) -> SandboxSpec:
    """A fork server needs evaluator/ visible and on PYTHONPATH, as the evaluator's sandboxes have it."""
    return SandboxSpec([REPO / "evaluator"], [], Path(HOME) if isolate else tmp_path, isolate=isolate, preload=preload)


FORKED_ENV = {"PYTHONPATH": str(REPO)}


def test_probe_finds_a_sandbox():
    assert probe() is None


def test_players_share_loopback_tmp_and_their_own_pids(tmp_path):
    # Player 0 listens on 127.0.0.1 and announces its port in /tmp; player 1 connects. Both list /proc
    # while the connection is open, so each sees the other.
    server = """
        import json, os, socket
        s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen()
        open("/tmp/port.tmp", "w").write(str(s.getsockname()[1])); os.rename("/tmp/port.tmp", "/tmp/port")
        conn, _ = s.accept()
        conn.sendall(str(os.getpid()).encode()); peer = int(conn.recv(100))
        pids = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
        conn.sendall(b"x"); conn.recv(1)
        print(json.dumps({"pid": os.getpid(), "peer": peer, "pids": pids, "lo": socket.if_nameindex()}))
    """
    client = """
        import json, os, socket, time
        while not os.path.exists("/tmp/port"): time.sleep(0.01)
        conn = socket.create_connection(("127.0.0.1", int(open("/tmp/port").read())))
        peer = int(conn.recv(100)); conn.sendall(str(os.getpid()).encode())
        conn.recv(1)
        pids = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
        conn.sendall(b"x")
        print(json.dumps({"pid": os.getpid(), "peer": peer, "pids": pids}))
    """
    exits, (a, b) = run(tmp_path, [server, client])
    assert exits == {0: 0, 1: 0}
    assert a["peer"] == b["pid"] and b["peer"] == a["pid"]
    # Only the namespace's pid 1 and the two players: not the test, nor any other host process.
    assert set(a["pids"]) == set(b["pids"]) == {1, a["pid"], b["pid"]}
    assert os.getpid() not in a["pids"]
    assert a["lo"] == [[1, "lo"]]  # no interface but loopback


def test_no_network_outside(tmp_path):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = listener.getsockname()[1]
    code = f"""
        import json, socket
        try:
            socket.create_connection(("127.0.0.1", {port}), timeout=5); result = "connected"
        except OSError as e:
            result = type(e).__name__
        print(json.dumps(result))
    """
    with listener:
        exits, (result,) = run(tmp_path, [code])
    assert exits == {0: 0}
    assert result == "ConnectionRefusedError"


def test_only_the_whitelist_is_visible(tmp_path):
    name = f"isolation-test-{uuid.uuid4().hex}"
    if os.access(REPO, os.W_OK):
        (REPO / "var").mkdir(exist_ok=True)
    hidden = [REPO / "var" / name, Path("/root") / name, tmp_path / name]
    if os.getuid() != 0:  # /root and the repository may not be ours to write to
        hidden = [p for p in hidden if os.access(p.parent, os.W_OK)]
    for path in hidden:
        path.write_text("secret")
    code = f"""
        import json, os
        print(json.dumps({{
            "hidden": [os.path.exists(p) for p in {[str(p) for p in hidden]!r}],
            "git": os.path.exists({str(REPO / ".git")!r}),
            "shadow": open("/etc/shadow").read() if os.path.exists("/etc/shadow") else "",
            "sees": os.path.exists({str(REPO / "evaluator" / "isolation.py")!r}),
            "bin": os.path.realpath("/bin/sh"),
            "python": os.path.exists({sys.executable!r}),
            "devices": sorted(os.listdir("/dev")),
        }}))
    """
    try:
        exits, (seen,) = run(tmp_path, [code], SandboxSpec([REPO / "evaluator"], [], Path(HOME)))
    finally:
        for path in hidden:
            path.unlink()
    assert exits == {0: 0}, seen
    assert seen["hidden"] == [False] * len(hidden)
    assert not seen["git"] and seen["shadow"] == ""
    assert seen["sees"] and seen["python"]
    assert seen["bin"] == os.path.realpath("/bin/sh")  # the /bin -> usr/bin symlink is recreated
    assert "shm" in seen["devices"] and "null" in seen["devices"]
    assert not any(d.startswith(("sd", "vd", "nvme", "loop", "kmsg", "mem")) for d in seen["devices"])


def test_writes_only_where_allowed(tmp_path):
    build, readonly = tmp_path / "build", tmp_path / "ro"
    build.mkdir()
    readonly.mkdir()
    secret = f"/tmp/isolation-test-{uuid.uuid4().hex}"
    # A checkout under /tmp would be written in the sandbox's own /tmp, never the host's: not a refusal.
    repo_target = [] if str(REPO).startswith("/tmp/") else [str(REPO / "x")]
    targets = [str(build / "out"), secret, HOME + "/cache", str(readonly / "x"), "/usr/x", *repo_target,
               "/x", "/etc/x", "/sys/x", "/proc/sys/kernel/core_pattern"]
    code = f"""
        import json
        results = []
        for path in {targets!r}:
            try:
                with open(path, "w") as f:
                    f.write("written")
                results.append("ok")
            except OSError as e:
                results.append(type(e).__name__)
        print(json.dumps(results))
    """
    exits, (results,) = run(tmp_path, [code], SandboxSpec([readonly], [build], build))
    assert exits == {0: 0}, results
    assert results[:3] == ["ok", "ok", "ok"]
    assert all(r in ("OSError", "PermissionError", "FileNotFoundError") for r in results[3:]), results
    assert (build / "out").read_text() == "written"
    assert not os.path.exists(secret)  # the sandbox's /tmp was its own, and is gone
    assert not (REPO / "x").exists() and not (readonly / "x").exists()


def test_cannot_signal_outside_nor_pid_1(tmp_path):
    code = f"""
        import json, os, signal
        try:
            os.kill({os.getpid()}, signal.SIGTERM); outside = "sent"
        except OSError as e:
            outside = type(e).__name__
        os.kill(1, signal.SIGKILL)  # pid 1 of a namespace ignores signals from inside it
        forged = []  # pid 1's fds (the status pipe) are out of reach: no forged exit report
        for fd in os.listdir("/proc/1/fd"):
            try:
                os.write(os.open("/proc/1/fd/" + fd, os.O_WRONLY), b'{{"player": 0, "status": 42}}\\n')
                forged.append(fd)
            except OSError:
                pass
        print(json.dumps([outside, forged]))
    """
    exits, ((outside, forged),) = run(tmp_path, [code])
    assert exits == {0: 0}
    assert outside == "ProcessLookupError" and forged == []


def test_no_capabilities_and_no_new_privileges(tmp_path):
    code = """
        import ctypes, json
        status = dict(line.split(":\\t", 1) for line in open("/proc/self/status").read().splitlines() if ":\\t" in line)
        libc = ctypes.CDLL(None, use_errno=True)
        mounted = libc.mount(b"none", b"/tmp", b"tmpfs", 0, None)
        print(json.dumps({k: status[k].strip() for k in ("Uid", "CapEff", "CapPrm", "CapBnd", "CapInh", "NoNewPrivs")}
                         | {"mount": mounted}))
    """
    exits, (status,) = run(tmp_path, [code])
    assert exits == {0: 0}
    assert status["Uid"].split()[0] == str(os.getuid())  # the same uid (CUDA IPC with the judge)
    assert status["CapEff"] == status["CapPrm"] == status["CapBnd"] == status["CapInh"] == "0000000000000000"
    assert status["NoNewPrivs"] == "1"
    assert status["mount"] == -1


@pytest.mark.parametrize("start_by", ["exec", "fork"])
def test_fds_arrive_at_the_same_numbers_and_only_to_their_player(tmp_path, start_by):
    pipes = [os.pipe(), os.pipe()]
    mine, other = pipes[0][1], pipes[1][1]
    code = """
        import json, os
        mine, other = (int(x) for x in os.environ["FDS"].split(","))
        if os.environ["INDEX"] == "1":
            mine, other = other, mine
        os.write(mine, b"from player " + os.environ["INDEX"].encode())
        print(json.dumps(sorted(int(fd) for fd in os.listdir("/proc/self/fd"))))
    """
    spec, env = (forked(tmp_path), FORKED_ENV) if start_by == "fork" else (None, {})
    try:
        exits, open_fds = run(tmp_path, [code, code], spec, fds={0: (mine,), 1: (other,)}, FDS=f"{mine},{other}", **env)
        for _, w in pipes:
            os.close(w)
        assert exits == {0: 0, 1: 0}
        # stdin, stdout, stderr, its own fd, and the one listdir itself opens: nothing of the other
        # player's, of pid 1's or (forked) of the fork server's (the pids pipe, the other log)
        assert [len(fds) for fds in open_fds] == [5, 5] and mine in open_fds[0] and other in open_fds[1], open_fds
        assert other not in open_fds[0] and mine not in open_fds[1]
        assert [os.read(r, 100) for r, _ in pipes] == [b"from player 0", b"from player 1"]
    finally:
        for r, _ in pipes:
            os.close(r)


@pytest.mark.parametrize("isolate", [True, False])
def test_a_dead_players_socket_closes_while_the_sandbox_lives(tmp_path, isolate):
    """Only the player holds its end: when it dies, its judge reads EOF at once, even while the
    sandbox (another player, pid 1, unshare) goes on. A copy of the end kept anywhere else (unshare
    used to inherit one) left the judge waiting for an answer until the time limit."""
    ends = [socket.socketpair(), socket.socketpair()]
    dies = "import os; os.abort()"
    lives = "import sys, time; sys.stdin.read(); time.sleep(60)"
    players = [player(dies, tmp_path / "dies.log", (ends[0][1].fileno(),)),
               player(lives, tmp_path / "lives.log", (ends[1][1].fileno(),))]
    try:
        with start(players, SandboxSpec([], [], Path(HOME) if isolate else tmp_path, isolate=isolate)) as sandbox:
            for _, player_end in ends:
                player_end.close()
            judge_end = ends[0][0]
            judge_end.settimeout(20)
            assert judge_end.recv(1) == b"", "the dead player's socket did not close"
            assert sandbox.alive()
            ends[1][0].settimeout(0.2)
            with pytest.raises(TimeoutError):
                ends[1][0].recv(1)  # the living player's end stays open
    finally:
        for a, b in ends:
            a.close()
            b.close()


def test_exit_statuses_and_signals(tmp_path):
    codes = ["raise SystemExit(3)", "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)", "pass"]
    exits, _ = run(tmp_path, codes)
    assert exits == {0: 3, 1: -signal.SIGSEGV, 2: 0}


def test_a_player_that_cannot_start(tmp_path):
    players = [PlayerSpec(["/nonexistent/binary"], ENV, (), tmp_path / "a.log"),
               player("print('fine')", tmp_path / "b.log")]
    with start(players, SandboxSpec([], [], Path(HOME))) as sandbox:
        assert sandbox.wait(30)
        assert sandbox.exits() == {0: 127, 1: 0}
        assert "FileNotFoundError" in sandbox.errors[0]
    assert (tmp_path / "b.log").read_text() == "fine\n"


def test_a_sandbox_that_cannot_be_set_up(tmp_path, monkeypatch):
    broken = tmp_path / "init.py"
    broken.write_text("import sys; sys.exit('no namespaces for you')")
    monkeypatch.setattr(isolation, "INIT", broken)
    with pytest.raises(SandboxUnavailable, match="no namespaces for you"):
        start([player("pass", tmp_path / "p.log")], SandboxSpec([], [], Path(HOME)))


def test_bad_specs_are_refused(tmp_path):
    spec_player = [player("pass", tmp_path / "p.log")]
    with pytest.raises(FileNotFoundError):
        start(spec_player, SandboxSpec([tmp_path / "missing"], [], Path(HOME)))
    with pytest.raises(ValueError):
        start(spec_player, SandboxSpec([], [Path("/tmp")], Path(HOME)))
    with pytest.raises(ValueError):
        start(spec_player, SandboxSpec([], [tmp_path], Path("/usr")))  # cwd neither writable nor in /tmp


DAEMON_AND_FORKS = """
    import os, time
    fd = int(os.environ["FD"])
    if os.fork() == 0:  # a daemon: double fork, new session; it holds `fd` open while it lives
        os.setsid()
        if os.fork() == 0:
            time.sleep(300)
        os._exit(0)
    for _ in range(200):  # a bounded fork bomb: 200 sleeping children, also holding `fd`
        if os.fork() == 0:
            time.sleep(300)
            os._exit(0)
    os.write(fd, b"ready")
    if os.environ.get("STAY"):
        time.sleep(300)
"""


@pytest.mark.parametrize("isolate", [True, False])
def test_kill_leaves_no_process(tmp_path, isolate):
    r, w = os.pipe()
    spec = SandboxSpec([], [], Path(HOME) if isolate else tmp_path, isolate=isolate)
    sandbox = start([player(DAEMON_AND_FORKS, tmp_path / "p.log", (w,), FD=str(w), STAY="1")], spec)
    os.close(w)
    try:
        assert os.read(r, 5) == b"ready", (tmp_path / "p.log").read_text()
        assert len(descendants(sandbox.host_pid)) > 200 and sandbox.alive()
        sandbox.kill()
        assert not sandbox.alive() and not descendants(sandbox.host_pid)
        os.set_blocking(r, False)
        assert os.read(r, 1) == b""  # no process holds the pipe any more: every one of them is gone
        sandbox.kill()  # idempotent
        assert sandbox.exits() == {0: -signal.SIGKILL}
    finally:
        sandbox.kill()
        os.close(r)


def test_processes_left_behind_die_with_the_last_player(tmp_path):
    r, w = os.pipe()
    exits, _ = run(tmp_path, [DAEMON_AND_FORKS], fds={0: (w,)}, FD=str(w))
    os.close(w)
    try:
        assert exits == {0: 0}
        assert os.read(r, 5) == b"ready"
        os.set_blocking(r, False)
        assert os.read(r, 1) == b""  # the daemon and the 200 children are gone with the namespace
    finally:
        os.close(r)


def test_not_isolated_still_has_fds_logs_and_limits(tmp_path):
    r, w = os.pipe()
    code = """
        import json, os, resource
        os.write(int(os.environ["FD"]), b"hi")
        print(json.dumps({"cwd": os.getcwd(), "host": os.path.exists("/proc/%d" % int(os.environ["PARENT"])),
                          "core": resource.getrlimit(resource.RLIMIT_CORE)[0],
                          "fsize": resource.getrlimit(resource.RLIMIT_FSIZE)[0]}))
    """
    try:
        exits, (seen,) = run(tmp_path, [code], SandboxSpec([], [], tmp_path, isolate=False), fds={0: (w,)},
                             FD=str(w), PARENT=str(os.getpid()))
        os.close(w)
        assert exits == {0: 0}
        assert os.read(r, 2) == b"hi"
        assert seen == {"cwd": str(tmp_path), "host": True, "core": 0, "fsize": 4 << 30}
    finally:
        os.close(r)


# -- players forked from one interpreter (SandboxSpec.preload, evaluator/forkserver.py) ------------


@pytest.mark.parametrize("isolate", [True, False])
def test_forked_players_end_as_their_own_interpreters_would(tmp_path, isolate):
    codes = [
        """
        import json, os, sys
        print(json.dumps({"preloaded": "decimal" in sys.modules, "index": os.environ["INDEX"],
                          "own_session": os.getsid(0) == os.getpid(), "argv": sys.argv}))
        """,
        "raise SystemExit(3)",
        "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)",
        "raise ValueError('from the player')",
    ]
    exits, outputs = run(tmp_path, codes, forked(tmp_path, isolate), **FORKED_ENV)
    assert exits == {0: 0, 1: 3, 2: -signal.SIGSEGV, 3: 1}
    assert outputs[0] == {"preloaded": True, "index": "0", "own_session": True, "argv": ["-c"]}
    log = (tmp_path / "player3.log").read_text()
    assert "ValueError: from the player" in log and "forkserver" not in log, log


def test_an_unforkable_player_is_refused_and_the_others_start(tmp_path):
    players = [PlayerSpec(["/bin/true"], ENV, (), tmp_path / "a.log"),
               player("print('fine')", tmp_path / "b.log", PYTHONPATH=str(REPO))]
    with start(players, forked(tmp_path)) as sandbox:
        assert sandbox.wait(30)
        assert sandbox.exits() == {0: 127, 1: 0}
        assert "can be forked" in sandbox.errors[0]
    assert (tmp_path / "b.log").read_text() == "fine\n"


def test_a_fork_server_that_cannot_preload_fails_every_player_with_a_reason(tmp_path):
    players = [player("print('never')", tmp_path / f"p{i}.log", PYTHONPATH=str(REPO)) for i in range(2)]
    with start(players, forked(tmp_path, preload=("no_such_module_anywhere",))) as sandbox:
        assert sandbox.wait(30)
        assert sandbox.exits() == {0: 127, 1: 127}
        assert all("fork server ended with status 1" in why for why in sandbox.errors.values()), sandbox.errors
    assert "ModuleNotFoundError" in (tmp_path / "p0.log").read_text()


def test_a_dead_forked_players_socket_closes_while_the_others_live(tmp_path):
    ends = [socket.socketpair(), socket.socketpair()]
    players = [player("import os; os.abort()", tmp_path / "dies.log", (ends[0][1].fileno(),), **FORKED_ENV),
               player("import sys, time; sys.stdin.read(); time.sleep(60)", tmp_path / "lives.log",
                      (ends[1][1].fileno(),), **FORKED_ENV)]
    try:
        with start(players, forked(tmp_path)) as sandbox:
            for _, player_end in ends:
                player_end.close()
            ends[0][0].settimeout(20)
            assert ends[0][0].recv(1) == b"", "the dead player's socket did not close"
            assert sandbox.alive()
            ends[1][0].settimeout(0.2)
            with pytest.raises(TimeoutError):
                ends[1][0].recv(1)
            assert sandbox.exits()[0] == -signal.SIGABRT
    finally:
        for a, b in ends:
            a.close()
            b.close()


@pytest.mark.parametrize("isolate", [True, False])
def test_kill_leaves_no_forked_process(tmp_path, isolate):
    r, w = os.pipe()
    sandbox = start([player(DAEMON_AND_FORKS, tmp_path / "p.log", (w,), FD=str(w), STAY="1", **FORKED_ENV)],
                    forked(tmp_path, isolate))
    os.close(w)
    try:
        assert os.read(r, 5) == b"ready", (tmp_path / "p.log").read_text()
        sandbox.kill()
        assert not sandbox.alive() and not descendants(sandbox.host_pid)
        os.set_blocking(r, False)
        assert os.read(r, 1) == b""
        assert sandbox.exits() == {0: -signal.SIGKILL}
    finally:
        sandbox.kill()
        os.close(r)


def test_a_forked_player_is_named_by_its_index(tmp_path):
    """Its /proc/PID/environ is the fork server's (fixed at exec), so tools read its index from its name."""
    code = "import os, sys, json, time; print(json.dumps(os.getpid()), flush=True); sys.stdin.read(); time.sleep(30)"
    players = [player(code, tmp_path / f"p{i}.log", **FORKED_ENV) for i in range(2)]
    with start(players, forked(tmp_path, isolate=False)) as sandbox:
        pids = []
        for i in range(2):
            log = tmp_path / f"p{i}.log"
            for _ in range(200):
                if log.read_text().strip():
                    break
                time.sleep(0.05)
            pids.append(json.loads(log.read_text()))
        assert [player_index(pid) for pid in pids] == [0, 1]
        sandbox.kill()
    assert player_index(os.getpid()) is None


KEEPS_ITS_CPU = """
import os, sys, threading
from evaluator.isolation_init import keep_affinity
placed = {min(os.sched_getaffinity(0))}
keep_affinity(placed)
every = set(range(os.cpu_count()))
os.sched_setaffinity(0, every)  # succeeds and does nothing
seen = [os.sched_getaffinity(0)]
worker = threading.Thread(target=lambda: (os.sched_setaffinity(0, every), seen.append(os.sched_getaffinity(0))))
worker.start()
worker.join()
print(sorted(placed), [sorted(s) for s in seen], os.getpid() > 0)
"""


def test_a_placed_player_cannot_widen_its_cpus():
    """The filter a placed player runs under (isolation_init.keep_affinity): sched_setaffinity
    succeeds and changes nothing, from any thread; other calls are untouched."""
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs two CPUs")
    out = subprocess.run([sys.executable, "-c", KEEPS_ITS_CPU], capture_output=True, text=True, timeout=60,
                         cwd=Path(__file__).resolve().parents[2])
    assert out.returncode == 0, out.stderr
    placed = min(os.sched_getaffinity(0))
    assert out.stdout.split() == [f"[{placed}]", f"[[{placed}],", f"[{placed}]]", "True"], out.stdout + out.stderr


WHERE_LIBC_LIES = """
import ctypes, json
print(json.dumps({"personality": int(open("/proc/self/personality").read(), 16),
                  "libc": ctypes.cast(ctypes.CDLL(None).printf, ctypes.c_void_p).value}))
"""


@pytest.mark.parametrize("preload", [None, ("decimal",)], ids=["exec", "forked"])
@pytest.mark.parametrize("fixed", [True, False], ids=["fixed", "random"])
def test_players_of_two_sandboxes_share_one_layout_when_it_is_fixed(tmp_path, preload, fixed):
    """The two sides' players live in sandboxes of their own (forked ones from a fork server
    each); with fixed layouts they map their libraries at the same addresses, so that identical
    code lays its memory out alike on both sides."""
    found = []
    for side in ("reference", "solution"):
        spec = SandboxSpec([REPO / "evaluator"], [], Path(HOME), preload=preload, fixed_layout=fixed)
        (tmp_path / side).mkdir()
        exits, outputs = run(tmp_path / side, [WHERE_LIBC_LIES], spec, **FORKED_ENV)
        assert exits == {0: 0}, outputs
        found.append(outputs[0])
    assert all(bool(o["personality"] & isolation_init.ADDR_NO_RANDOMIZE) == fixed for o in found), found
    assert (found[0]["libc"] == found[1]["libc"]) == fixed, found


def test_a_host_that_forbids_fixing_the_layout_leaves_it_random_instead_of_failing(monkeypatch):
    """Some container profiles refuse personality(ADDR_NO_RANDOMIZE): the player must still start."""
    monkeypatch.setattr(isolation_init.libc, "personality", lambda persona: -1)
    assert isolation_init.fix_layout() is False


def test_the_private_tmpfs_size_is_the_setting_or_an_eighth_of_memory_up_to_4_gib(monkeypatch):
    monkeypatch.setenv(isolation.TMPFS_ENV, "300")
    assert isolation.private_tmpfs_bytes() == 300 << 20
    monkeypatch.delenv(isolation.TMPFS_ENV)
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    assert isolation.private_tmpfs_bytes() == min(4 << 30, total // 8)
    # The size reaches the mounts (isolation_init.build_root) through the plan.
    plan = isolation._plan(SandboxSpec(readonly=[], writable=[], cwd=Path("/tmp/work")))
    assert plan["tmpfs_bytes"] == isolation.private_tmpfs_bytes()
