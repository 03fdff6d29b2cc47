"""Run one evaluation: per rank a judge process (evaluator/judge.py) and two players
(evaluator/player.py), one running the solution and one the reference, the players of each side
in a sandbox of their own (evaluator/isolation.py). Feed the judges secret seeds, collect their
reports, build the result document, and leave nothing running. Torch-free: the calling process
(CLI, GPU worker) never touches CUDA."""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from evaluator import assemble, disk_use, isolation, placement, results, sandbox
from evaluator.results import SIDES, BatchOrder, Mode, Stage, Status

ProgressFn = Callable[[str, dict], None]
DEFAULT_TIMEOUT_S = 600.0
# What an evaluation in cpu mode gets where its caller names nothing: the cpu mode proves the
# pipeline, not speed, so few iterations and the problem's default shape only (CPU ranks take
# minutes on the largest shapes). The timed calls come in batches of 8 (iters / 10): in batches
# of one, the ranks' jitter swamped calls of milliseconds (the reference called twice read 0.62
# instead of 0.5); the timing budget bounds the time either way.
CPU_DEFAULTS = {"warmup": 3, "iters": 80, "trials": 3, "shapes": "default"}
WATCH_INTERVAL_S = 2.0  # how often the solution's build directory is measured while it runs
FAILURE_GRACE_S = 5.0  # after one rank reports a failure, the others get this long to follow
JUDGE_LOG_CHARS = 4000  # of a broken judge's own log, in the evaluator's failure
STACK_DUMP_WAIT_S = 2.0  # the longest wait for unfinished ranks' stacks before they are killed
# Per shape, the timing beyond `iters` calls while the speedup's interval is wider than its target
# (evaluator/timing_stats.py): bounded so that a typical evaluation takes at most about 1.5x the
# fixed schedule's time (bench/NOTES.md).
DEFAULT_TIMING_BUDGET_S = 2.0
DEFAULT_BUILD_DIR = Path(os.environ.get("PKB_BUILD_DIR", Path.home() / ".cache" / "pkb-builds"))


class EvaluatorError(Exception):
    """The evaluator or the host broke (not the solution): retry elsewhere or later."""


class NoSandbox(EvaluatorError):
    """This host cannot sandbox players: it refuses to judge uploaded code."""


@dataclass
class EvaluationRequest:
    problem: str  # a suite id, or a public-suite number with pkb_root
    solution_code: str
    world_size: int = 2
    mode: str = Mode.CPU
    hardware: str | None = None  # roofline profile key (evaluator/hardware.toml); detected on GPUs
    shapes: list[str] | None = None  # shape names; None = all
    dims: dict[str, int] | None = None  # one custom shape instead
    warmup: int = 500
    iters: int = 100
    trials: int = 5
    timeout_s: float = DEFAULT_TIMEOUT_S
    timing_budget_s: float = DEFAULT_TIMING_BUDGET_S  # 0: exactly `iters` timed calls per side
    pkb_root: str | None = None
    build_dir: str | None = None
    # A diagnostic (bench/l2_policy.py), never the leaderboard's policy: each player writes this many
    # MiB before every call, to push the inputs out of the GPU's L2. A solution's player could skip it.
    flush_l2_mib: float = 0.0
    # A diagnostic too (bin/gpu-check order): the timed pairs' order; only the default is fair.
    batch_order: str = BatchOrder.SYMMETRIC
    # And another (bench/suite_timings.py --batch-target-ms): how long the faster side's timed batch
    # lasts on a GPU, in ms; 0 is the judge's own (judge.BATCH_TARGET_S).
    batch_target_ms: float = 0.0
    selfcheck: dict | None = field(default=None, repr=False)  # internal: problems and seed, see evaluator.selfcheck
    # False only for someone judging their own file on the command line: players then run without
    # namespaces (same limits and clean-up), and the result says so.
    sandboxed: bool = True

    def validate(self) -> None:
        if self.mode not in [m.value for m in Mode]:
            raise ValueError(f"mode must be one of {', '.join(Mode)}, not {self.mode!r}")
        if self.world_size < 1:
            raise ValueError("world size must be at least 1")
        if self.trials < 1 or self.iters < 0 or self.warmup < 0:
            raise ValueError("trials must be >= 1, iters and warmup >= 0")
        if self.timeout_s <= 0:
            raise ValueError("timeout must be positive")
        if not 0 <= self.timing_budget_s < self.timeout_s:
            raise ValueError("the timing budget must be >= 0 and below the timeout")
        if not 0 <= self.flush_l2_mib <= 4096:
            raise ValueError("flush_l2_mib must be between 0 and 4096")
        if self.batch_order not in [o.value for o in BatchOrder]:
            raise ValueError(f"batch_order must be one of {', '.join(BatchOrder)}, not {self.batch_order!r}")
        if not (self.batch_target_ms == 0 or 0.5 <= self.batch_target_ms <= 250):
            raise ValueError("batch_target_ms must be 0 (the judge's) or between 0.5 and 250")
        if self.batch_target_ms and (self.mode == Mode.CPU or self.timing_budget_s == 0):
            raise ValueError("batch_target_ms sizes batches on a GPU with a timing budget only; cpu mode's "
                             "and a fixed schedule's hold iters / 10 calls")


def _seed(secret: bytes, *parts: Any) -> int:
    digest = hashlib.blake2b(repr(parts).encode(), key=secret, digest_size=8).digest()
    return int.from_bytes(digest, "little") >> 1


def _public_seed(*parts: Any) -> int:
    return int.from_bytes(hashlib.sha256(repr(("public", *parts)).encode()).digest()[:8], "little") >> 1


def seed_stream(secret: bytes, problem: str, shapes: list[dict], rank: int, trials: int, timed: bool) -> list[dict]:
    """Every seed a rank will read, in order. Per-rank seeds differ; shared seeds agree across ranks.
    The public trial's seeds are fixed, so output digests are comparable across hardware."""
    stream = []

    def add(kind: str, shape: str, seed: int, shared: int) -> None:
        stream.append({"seq": len(stream), "kind": kind, "shape": shape, "seed": seed, "shared_seed": shared})

    for shape in shapes:
        name = shape["name"]
        for t in range(trials):
            add("trial", name, _seed(secret, name, t, rank), _seed(secret, name, t, "shared"))
        if timed:
            add("timing", name, _seed(secret, name, "timing", rank), _seed(secret, name, "timing", "shared"))
        add("public", name, _public_seed(problem, name, rank), _public_seed(problem, name, "shared"))
    return stream


@dataclass
class RankProcess:
    """One rank's judge, as the parent sees it."""

    rank: int
    proc: subprocess.Popen
    result_fd: int
    log_path: Path
    control_fd: int = -1  # the seed stream's write end while `unsent` is not empty
    unsent: bytes = b""
    buffer: bytes = b""
    final: dict | None = None
    infra: str | None = None
    last_stage: str = Stage.STARTING
    exit_code: int | None = None  # as seen before the evaluator killed anything
    log_text: str = ""
    stacks_at: int | None = None  # where in the log the stacks asked for at the end begin


def resolve_problem(req: EvaluationRequest) -> tuple[dict, list[dict], Any]:
    """(problem source for the judges, shapes to run, the suite's Problem or None). The source is
    also what the reference's players run: its `kind` is a player target's."""
    if req.pkb_root:
        number = int(str(req.problem).removeprefix("pkb:"))
        dims = req.dims or {"M": 1024, "N": 1024}
        source = {"kind": "pkb", "root": str(Path(req.pkb_root).resolve()), "id": number}
        return source, [{"name": "base", "dims": dims, "default": True}], None
    import tasks

    spec = tasks.get(req.problem)
    if req.world_size not in spec.world_sizes:
        raise ValueError(f"{spec.id} supports world sizes {spec.world_sizes}, not {req.world_size}")
    if req.dims:
        shapes = [{"name": "custom", "dims": dict(req.dims), "default": True}]
    else:
        chosen = [spec.shape(n) for n in req.shapes] if req.shapes else list(spec.shapes)
        shapes = [{"name": s.name, "dims": dict(s.dims), "default": s.default} for s in chosen]
        if not any(s["default"] for s in shapes):
            shapes[0]["default"] = True
    return {"kind": "suite", "id": spec.id}, shapes, spec


def evaluate(req: EvaluationRequest, on_progress: ProgressFn | None = None) -> dict:
    """Judge `req.solution_code`. Returns the result document for anything the solution did;
    raises EvaluatorError when the evaluator or host failed, ValueError for a bad request."""
    req.validate()
    source, shapes, spec = resolve_problem(req)
    notify = on_progress or (lambda stage, detail: None)
    started_at = time.time()
    ranks, outcome, wall_s = run_ranks(req, source, shapes, notify)
    doc = assemble.document(
        req=req, spec=spec, shapes=shapes, ranks=ranks, outcome=outcome, started_at=started_at, wall_s=wall_s
    )
    notify(Stage.DONE, {"status": doc["status"]})
    return doc


def run_ranks(req: EvaluationRequest, source: dict, shapes: list[dict], notify: ProgressFn):
    """Spawn the judges and both sides' players, feed the judges, collect their reports, and leave
    nothing running."""
    if req.sandboxed and (reason := isolation.probe()) is not None:
        raise NoSandbox(f"this host cannot sandbox submitted code, so it refuses to judge it: {reason}")
    code_hash = hashlib.sha256(req.solution_code.encode()).hexdigest()
    # One build directory per distinct solution: builds are reused by the same code only. The
    # reference's players (our code) share one of their own, which no solution sees.
    build_root = Path(req.build_dir or DEFAULT_BUILD_DIR)
    build_dirs = {"solution": build_root / code_hash[:24], "reference": build_root / "reference"}
    workdir = Path(tempfile.mkdtemp(prefix="pkb-eval-"))
    secret = secrets.token_bytes(32)
    nonce = secrets.token_hex(16)
    submission = workdir / "submission"
    t0 = time.monotonic()
    ranks: list[RankProcess] = []
    boxes: dict[str, isolation.Sandbox] = {}
    judge_fds: list[list[int]] = [[] for _ in range(req.world_size)]  # closed in `finally` if still held
    disk_limit = disk_use.limit_bytes()  # of the solution's build directory
    sandbox.become_subreaper()
    baseline = sandbox.descendants([os.getpid()])
    notify(Stage.STARTING, {})
    try:
        for d in (*build_dirs.values(), submission):
            d.mkdir(parents=True, exist_ok=True)
        (submission / "solution.py").write_text(req.solution_code)
        targets = {"solution": {"kind": "file", "path": str(submission / "solution.py")}, "reference": source}
        sides = {side: _side_layout(req, side, workdir, build_dirs[side], submission) for side in SIDES}
        placements = placement.for_host(req.world_size, req.mode)
        for side, layout in sides.items():
            players = []
            for rank in range(req.world_size):
                judge_end, player_end = socket.socketpair()
                judge_fds[rank].append(judge_end.detach())
                fd = player_end.detach()
                players.append(isolation.PlayerSpec(
                    argv=[sys.executable, "-m", "evaluator.player", str(fd)],
                    env=sandbox.player_environment(rank, req.world_size, req.mode, layout["home"], build_dirs[side]),
                    fds=(fd,), log_path=workdir / f"{side}{rank}.log",
                    cpus=placements[rank].start if placements else (),
                ))
            try:
                boxes[side] = isolation.start(players, layout["spec"])
            finally:
                for spec in players:
                    isolation.close_quietly(spec.fds[0])
        for rank in range(req.world_size):
            control_r, control_w = os.pipe()
            result_r, result_w = os.pipe()
            config = {
                "nonce": nonce, "rank": rank, "world_size": req.world_size, "mode": req.mode,
                "problem": source, "shapes": shapes, "solution": targets["solution"], "reference": targets["reference"],
                "store": str(workdir / "store"), "player_stores": {side: sides[side]["store"] for side in SIDES},
                "trials": req.trials, "iters": req.iters, "warmup": req.warmup, "timeout_s": req.timeout_s,
                "timing_budget_s": req.timing_budget_s, "selfcheck": req.selfcheck,
                "flush_l2_mib": req.flush_l2_mib,
                "batch_order": req.batch_order, "batch_target_ms": req.batch_target_ms,
                "solution_root": boxes["solution"].host_pid, "reference_root": boxes["reference"].host_pid,
                "placements": [asdict(p) for p in placements] if placements else None,
            }
            lines = [json.dumps(config)] + [
                json.dumps(m) for m in seed_stream(secret, source.get("id"), shapes, rank, req.trials, req.iters > 0)
            ]
            fds = (control_r, result_w, *judge_fds[rank])
            proc = sandbox.spawn_rank(
                rank, req.world_size, [str(fd) for fd in fds],
                env=sandbox.rank_environment(rank, req.world_size, req.mode, workdir),
                cwd=workdir, log_path=workdir / f"rank{rank}.log", pass_fds=fds,
                cpus=placements[rank].judge if placements else (),
            )
            for fd in fds:
                os.close(fd)
            judge_fds[rank] = []
            # Fed as the rank reads (see _collect): a stream longer than the pipe holds would
            # block here, before the other ranks exist, while this one waits for them.
            os.set_blocking(control_w, False)
            ranks.append(RankProcess(rank, proc, result_r, workdir / f"rank{rank}.log", control_w,
                                     ("\n".join(lines) + "\n").encode()))
        outcome = _collect(ranks, nonce, req.timeout_s, t0, notify,
                           watch=lambda: disk_use.over_limit(build_dirs["solution"], disk_limit))
        _dump_stacks(ranks, boxes)
        outcome["players"] = _player_exits(ranks, boxes)
        _stop(ranks, boxes, baseline)
        # What it wrote after the last look, now that none of its processes is left to write more.
        outcome["tampered"] = outcome["tampered"] or disk_use.over_limit(build_dirs["solution"], disk_limit)
        for r in ranks:
            judge_log = _read_log(r)
            r.log_text = judge_log + "".join(_player_log(workdir, side, r.rank) for side in SIDES)
            # A judge runs none of the solution's code, and no solution can signal it: one that
            # exits with a code before reporting broke on its own (a signal may be the kernel's
            # answer to the solution's memory, and stays the solution's runtime error).
            if r.final is None and r.infra is None and r.exit_code is not None and r.exit_code > 0:
                r.infra = (f"the judge exited with code {r.exit_code} before reporting (stage: {r.last_stage}); "
                           f"its log:\n{results.tail(judge_log, JUDGE_LOG_CHARS)}")
    except (OSError, isolation.SandboxUnavailable) as exc:
        raise EvaluatorError(f"evaluator failure: {type(exc).__name__}: {exc}") from exc
    finally:
        _stop(ranks, boxes, baseline)
        for r in ranks:
            isolation.close_quietly(r.result_fd)
            isolation.close_quietly(r.control_fd)
        for fds in judge_fds:
            for fd in fds:
                isolation.close_quietly(fd)
        shutil.rmtree(workdir, ignore_errors=True)
        if disk_use.over_limit(build_dirs["solution"], disk_limit) is not None:
            shutil.rmtree(build_dirs["solution"], ignore_errors=True)  # kept for this code's next evaluation otherwise
    infra = [r for r in ranks if r.infra]
    if infra:
        raise EvaluatorError(f"rank {infra[0].rank}: {infra[0].infra}")
    return ranks, outcome, time.monotonic() - t0


# What every player imports, imported once per side and forked from (evaluator/forkserver.py): at
# world 2 on two cores, each torch import is about 1.5 s of CPU, and the four players' imports were
# most of an evaluation's start (allreduce small at world 2: 7.0-7.9 s an evaluation before, 5.0 s
# forked; at world 4, 10.8-11.3 s and 7.1-7.9 s). None of it starts a thread or touches a GPU.
PLAYER_PRELOAD = ("torch", "torch.distributed", "evaluator.transport")
# The modes whose players are forked. Not the GPU modes yet: forked, on an H100, the symmetric-memory
# tests and a shared-gpu selfcheck (at repro_linear, after 47 problems) hung, the judges waiting
# for a player's answer and the players for a request (bin/gpu-check evalgpu selfshared).
FORKED_MODES = (Mode.CPU,)


# How the players' memory is laid out: at fixed addresses, so that both sides' processes lay
# identical code out alike (isolation_init.fix_layout), unless a host sets this to "random" (the
# kernel's randomisation, for comparison); any other value keeps the default.
LAYOUT_ENV = "PKB_PLAYER_LAYOUT"


def fixed_layout() -> bool:
    return os.environ.get(LAYOUT_ENV) != "random"


def _side_layout(req: EvaluationRequest, side: str, workdir: Path, build_dir: Path, submission: Path) -> dict:
    """Where one side's players live. In a sandbox: a private /tmp (their rendezvous and home),
    the code they need read-only, their build directory writable, nothing else of the host."""
    repo = sandbox.REPO_ROOT
    readonly = [repo / "evaluator", repo / "tasks"]
    readonly += [submission] if side == "solution" else []
    readonly += [Path(req.pkb_root).resolve()] if req.pkb_root else []
    if req.sandboxed:
        tmp = Path("/tmp")
    else:
        tmp = workdir / f"{side}-tmp"
        (tmp / "home").mkdir(parents=True)
    spec = isolation.SandboxSpec(readonly=readonly, writable=[build_dir], cwd=tmp, isolate=req.sandboxed,
                                 preload=PLAYER_PRELOAD if req.mode in FORKED_MODES else None,
                                 fixed_layout=fixed_layout())
    return {"spec": spec, "home": tmp / "home", "store": str(tmp / f"{side}-players.store")}


def _stop(ranks: list[RankProcess], boxes: dict, baseline: set[int]) -> None:
    try:
        for box in boxes.values():
            box.kill()
    finally:  # the judges and any stray go too, whatever a sandbox's end raised
        sandbox.kill_all([r.proc for r in ranks], baseline)


def _player_log(workdir: Path, side: str, rank: int) -> str:
    try:
        text = (workdir / f"{side}{rank}.log").read_bytes().decode(errors="replace")
    except OSError:
        return ""
    return f"\n[{side} process of rank {rank}]\n{text}" if text.strip() else ""


def _player_exits(ranks: list[RankProcess], boxes: dict) -> dict[str, dict[int, int | None]]:
    """How each side's players ended. A judge that saw its player end reports at once, maybe
    before the sandbox has reaped it: give those a moment."""
    deadline = time.monotonic() + 2.0
    while True:
        exits = {side: box.exits() for side, box in boxes.items()}
        waiting = [r for r in ranks if (r.final or {}).get("gone") is not None
                   and all(exits[side].get(r.rank) is None for side in exits)]
        if not waiting or time.monotonic() >= deadline:
            return exits
        time.sleep(0.05)


def _players_of(box) -> list[int]:
    """Host pids of a sandbox's player processes (not its own, which must not get signals)."""
    pids = []
    for pid in sandbox.descendants([box.host_pid]):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if b"evaluator.player" in f.read():
                    pids.append(pid)
        except OSError:
            pass
    return pids


def _dump_stacks(ranks: list[RankProcess], boxes: dict) -> None:
    """Every rank still running without a final report writes its threads' stacks into its log,
    and so do the players (SIGUSR1, see evaluator.rank and evaluator.player), so a time-out or
    deadlock says where each rank was."""
    unfinished = [r for r in ranks if r.final is None and r.infra is None and r.proc.poll() is None]
    targets = [r.proc.pid for r in unfinished] + ([p for box in boxes.values() for p in _players_of(box)] if unfinished else [])
    for r in unfinished:
        r.stacks_at = _size(r.log_path)
    for pid in targets:
        try:
            os.kill(pid, signal.SIGCONT)  # a solution's player stopped while the reference was timed
            os.kill(pid, signal.SIGUSR1)
        except ProcessLookupError:
            pass
    # The dump is written from the signal handler in one go: wait until every log has grown and
    # then stayed the same for a moment (a rank that cannot dump costs STACK_DUMP_WAIT_S at most).
    deadline = time.monotonic() + STACK_DUMP_WAIT_S
    sizes: dict[int, int] = {}
    while unfinished and time.monotonic() < deadline:
        time.sleep(0.05)
        now = {r.rank: _size(r.log_path) for r in unfinished}
        if now == sizes and all(now[r.rank] > r.stacks_at for r in unfinished):
            break
        sizes = now


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _read_log(r: RankProcess) -> str:
    try:
        data = r.log_path.read_bytes()
    except OSError:
        return ""
    if r.stacks_at is not None and len(data) > r.stacks_at:
        head, stacks = data[: r.stacks_at], data[r.stacks_at :]
        newline = b"\n" if head and not head.endswith(b"\n") else b""
        data = head + newline + b"[stopped by the evaluator; where its threads were:]\n" + stacks
    return data.decode(errors="replace")


def _collect(ranks: list[RankProcess], nonce: str, timeout_s: float, t0: float, notify: ProgressFn,
             watch: Callable[[], str | None] | None = None) -> dict:
    """Pump messages until every rank has reported, died, or the deadline passed."""
    selector = selectors.DefaultSelector()
    for r in ranks:
        os.set_blocking(r.result_fd, False)
        selector.register(r.result_fd, selectors.EVENT_READ, r)
        selector.register(r.control_fd, selectors.EVENT_WRITE, r)
    deadline = t0 + timeout_s
    failure_at: float | None = None
    tampered: str | None = None
    startup_s: float | None = None
    open_fds = len(ranks)
    next_watch = t0
    while True:
        now = time.monotonic()
        if all(r.final or r.infra for r in ranks):
            break
        if watch is not None and now >= next_watch:  # a solution over a limit ends here, not at the deadline
            next_watch = now + WATCH_INTERVAL_S
            if (reason := watch()) is not None:
                tampered = tampered or reason
                break
        if now >= deadline or (failure_at is not None and now >= failure_at + FAILURE_GRACE_S):
            break
        if open_fds == 0:
            break
        for key, _ in selector.select(timeout=min(0.5, max(0.01, deadline - now))):
            r: RankProcess = key.data
            if key.fd == r.control_fd:
                _feed(r, selector)
                continue
            try:
                chunk = os.read(r.result_fd, 1 << 16)
            except BlockingIOError:
                continue
            if not chunk:
                selector.unregister(r.result_fd)
                open_fds -= 1
                continue
            r.buffer += chunk
            *lines, r.buffer = r.buffer.split(b"\n")
            for line in lines:
                try:
                    msg = json.loads(line)
                except ValueError:
                    tampered = tampered or f"rank {r.rank}: unreadable message on the result channel"
                    continue
                if not isinstance(msg, dict) or msg.get("nonce") != nonce:
                    tampered = tampered or f"rank {r.rank}: forged message on the result channel"
                    continue
                kind = msg.get("type")
                if kind == "progress":
                    r.last_stage = msg.get("stage", r.last_stage)
                    if startup_s is None:
                        startup_s = time.monotonic() - t0
                    notify(r.last_stage, {k: v for k, v in msg.items() if k not in ("nonce", "type", "stage")})
                elif kind == "final":
                    if r.final is not None:
                        tampered = tampered or f"rank {r.rank}: two final reports"
                    r.final = msg
                    if msg.get("status") != Status.CORRECT and failure_at is None:
                        failure_at = time.monotonic()
                elif kind == "infra":
                    r.infra = msg.get("reason", "host failure")
                    # Its peers may wait for it in a collective: they get the grace, not the deadline.
                    failure_at = failure_at or time.monotonic()
        # A rank that exited without reporting crashed (or was killed by the kernel).
        for r in ranks:
            if r.final is None and r.infra is None and r.proc.poll() is not None and failure_at is None:
                failure_at = time.monotonic()
    selector.close()
    for r in ranks:
        r.exit_code = r.proc.poll()
    timed_out = time.monotonic() >= deadline and not all(r.final for r in ranks)
    return {"tampered": tampered, "timed_out": timed_out, "startup_s": startup_s}


def _feed(r: RankProcess, selector: selectors.BaseSelector) -> None:
    """Writes what the control pipe takes of the rank's configuration and seeds; closes it after
    the last seed (or when the rank is gone: its exit is noticed by _collect)."""
    try:
        r.unsent = r.unsent[os.write(r.control_fd, r.unsent) :]
    except BlockingIOError:
        return
    except BrokenPipeError:
        r.unsent = b""
    if not r.unsent:
        selector.unregister(r.control_fd)
        isolation.close_quietly(r.control_fd)
        r.control_fd = -1


def exit_description(code: int | None) -> str:
    if code is None:
        return "still running"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exited with code {code}"
