"""Shared helpers of the adversarial suite: run an attack (a solution file under attacks/) through the
public API, compare it with the honest reference, and make sure that nothing it started outlives its
evaluation.

Test modules cannot import a conftest by name (pytest loads several under the same one), so they
get this module's helpers from the `adv` fixture: `adv.judge(...)`, `adv.assert_not_correct(doc)`.

An attack file picks its variant and any value the test must give it from module-level lines such
as `VARIANT = "count"` or `PORT = None`; `attack_source` rewrites those lines. Every evaluation
here goes through `judge` or `judge_code`, which fail the test when any process descending from
the test process is still alive once `evaluate` has returned (and kill those, by pid).
"""

from __future__ import annotations

import json
import math
import os
import re
import signal
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import tasks
from evaluator.launch import EvaluationRequest, evaluate
from evaluator.sandbox import descendants

HERE = Path(__file__).resolve().parent
ATTACKS = HERE / "attacks"
REPO_ROOT = HERE.parent.parent

# Few calls on tiny shapes: the whole CPU part of this suite has a budget of a few minutes.
FAST = {"warmup": 2, "iters": 8, "trials": 2, "timeout_s": 60, "timing_budget_s": 0}
# The mode the attacks written for cpu mode run in: on a GPU host, `PKB_ADVERSARIAL_MODE=shared-gpu`
# runs the whole suite with its ranks on one GPU (and `gpu` where it has a GPU per rank).
DEFAULT_MODE = os.environ.get("PKB_ADVERSARIAL_MODE", "cpu")
# Ranks per evaluation: `gpu` mode on a host with one GPU runs the suite with PKB_ADVERSARIAL_WORLD=1.
DEFAULT_WORLD = int(os.environ.get("PKB_ADVERSARIAL_WORLD", "2"))
# For attacks judged by their speedup: more timed calls.
TIMED = {"warmup": 4, "iters": 32, "trials": 2, "timeout_s": 90}
# How far an attack's speedup may stray from the honest one, per mode: 1.5x in gpu mode (NCCL).
# Where the players' collectives run on gloo over loopback (cpu, shared-gpu), the reference
# against itself read 0.6x to 1.5x from one evaluation to the next on two cores (2.5x once, in a
# loaded full-suite run), each side keeping its own speed for a whole evaluation; the margin there
# is 3x, and the speed attacks are sized to gain far more than that when they work (a skipped
# all-reduce, a reference slept 20 ms per call).
SPEED_MARGIN = {"cpu": 3.0, "shared-gpu": 3.0, "gpu": 1.5}
LEFTOVER_GRACE_S = 1.0  # processes SIGKILLed by the evaluator may take a moment to disappear
LOG_TAIL_LIMIT = 20_000


def smallest_shape(problem: str) -> str:
    """The problem's shape with the fewest elements (its dims' product)."""
    shapes = tasks.get(problem).shapes
    return min(shapes, key=lambda s: math.prod(max(1, int(v)) for v in s.dims.values())).name


def attack_path(name: str) -> Path:
    return ATTACKS / f"{name}.py"


def attack_source(name: str, **settings: Any) -> str:
    """The attack's code with each `NAME = ...` module-level line named in `settings` rewritten to
    `NAME = repr(value)`. A name the file does not define is an error (a typo would silently run
    the default variant)."""
    code = attack_path(name).read_text()
    for key, value in settings.items():
        code, n = re.subn(rf"^{re.escape(key)} = .*$", f"{key} = {value!r}", code, count=1, flags=re.M)
        if n != 1:
            raise KeyError(f"{name}.py has no line `{key} = ...` to set")
    return code


def _reap(pids: set[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    deadline = time.monotonic() + 5
    pending = set(pids)
    while pending and time.monotonic() < deadline:
        for pid in list(pending):
            try:
                if os.waitpid(pid, os.WNOHANG)[0]:
                    pending.discard(pid)
            except ChildProcessError:
                # Not our child (a grandchild re-parented elsewhere): gone once /proc forgets it.
                if not os.path.exists(f"/proc/{pid}"):
                    pending.discard(pid)
        if pending:
            time.sleep(0.02)


def _describe(pid: int) -> str:
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        cmd = "?"
    return f"{pid} ({cmd[:120]})"


def leftovers() -> set[int]:
    """Descendants of the test process still alive after LEFTOVER_GRACE_S (zombies count: nobody reaped them)."""
    deadline = time.monotonic() + LEFTOVER_GRACE_S
    left = descendants([os.getpid()])
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        left = descendants([os.getpid()])
    return left


def _gpu_count() -> int:
    import torch

    return torch.cuda.device_count()


def judge_code(problem: str, code: str, *, world_size: int = DEFAULT_WORLD, mode: str = DEFAULT_MODE, shapes: list[str] | None = None,
               **overrides: Any) -> dict:
    """Evaluate `code` through the public API with FAST settings (overridable) on the problem's
    smallest shape. Fails the test if any process is left behind, after killing those by pid. The
    returned document carries the evaluation's wall time under "_wall_s"."""
    if world_size not in tasks.get(problem).world_sizes:
        pytest.skip(f"{problem} does not run at world size {world_size} (PKB_ADVERSARIAL_WORLD)")
    if mode == "gpu" and world_size > _gpu_count():
        pytest.skip(f"gpu mode at world size {world_size} needs {world_size} GPUs")
    settings = {**FAST, **overrides}
    request = EvaluationRequest(problem=problem, solution_code=code, world_size=world_size, mode=mode,
                                shapes=shapes or [smallest_shape(problem)], **settings)
    t0 = time.monotonic()
    doc = evaluate(request)
    doc["_wall_s"] = time.monotonic() - t0
    print(f"judged: {summary(doc)[:600]}")  # shown by -rA for passing tests too
    keep_document(doc)
    left = leftovers()
    if left:
        described = ", ".join(_describe(p) for p in sorted(left))
        _reap(left)
        pytest.fail(f"processes left behind after the evaluation (status {doc['status']}: {doc['reason']}): {described}")
    return doc


def keep_document(doc: dict) -> None:
    """With PKB_ADVERSARIAL_DOCS=DIR, every document judged goes there as JSON, named after the test
    (a GPU run's surprises, with every timed pair, can then be read after the machine is gone)."""
    folder = os.environ.get("PKB_ADVERSARIAL_DOCS")
    if not folder:
        return
    test = os.environ.get("PYTEST_CURRENT_TEST", "unknown").split(" ")[0].split("::")[-1]
    stem = re.sub(r"[^A-Za-z0-9_.-]+", "_", test)[:150]
    Path(folder).mkdir(parents=True, exist_ok=True)
    n = len(list(Path(folder).glob(f"{stem}.*.json")))
    (Path(folder) / f"{stem}.{n}.json").write_text(json.dumps(doc, indent=1))


def judge(problem: str, attack: str, *, variant: str | None = None, params: dict | None = None, **overrides: Any) -> dict:
    """Evaluate attacks/<attack>.py (with VARIANT and other module-level settings rewritten)."""
    settings = dict(params or {})
    if variant is not None:
        settings["VARIANT"] = variant
    return judge_code(problem, attack_source(attack, **settings), **overrides)


def judge_appended(problem: str, attack: str, *, variant: str | None = None, **overrides: Any) -> dict:
    """Evaluate the problem's reference source with attacks/<attack>.py appended: an honest solution
    carrying an attack that works through its process rather than its answers."""
    settings = {} if variant is None else {"VARIANT": variant}
    code = tasks.reference_source(problem) + "\n" + attack_source(attack, **settings)
    return judge_code(problem, code, **overrides)


_HONEST: dict[tuple, dict] = {}


def honest(problem: str, **overrides: Any) -> dict:
    """The honest reference judged as a solution (cached per problem and settings for the session)."""
    key = (problem, tuple(sorted((k, repr(v)) for k, v in overrides.items())))
    if key not in _HONEST:
        doc = judge_code(problem, tasks.reference_source(problem), **overrides)
        assert doc["status"] == "correct", f"the honest reference is not judged correct: {doc['reason']}"
        _HONEST[key] = doc
    return _HONEST[key]


def speedup(doc: dict) -> float | None:
    return doc["shapes"][0]["speedup"] if doc["shapes"] else None


def _time_us(doc: dict, side: str) -> float | None:
    timing = doc["shapes"][0][side] if doc["shapes"] else None
    return timing["time_us"] if timing else None


def solution_us(doc: dict) -> float | None:
    return _time_us(doc, "solution")


def reference_us(doc: dict) -> float | None:
    return _time_us(doc, "reference")


def summary(doc: dict) -> str:
    error = doc["shapes"][0]["max_abs_error"] if doc["shapes"] else None
    return (f"status={doc['status']} speedup={speedup(doc)} solution_us={solution_us(doc)} max_abs_error={error} "
            f"wall_s={doc.get('_wall_s', 0):.1f} reason={doc['reason'][:300]!r} log={doc['log_tail'][-1500:]!r}")


def assert_not_correct(doc: dict) -> None:
    assert doc["status"] != "correct", f"the judge was fooled: {summary(doc)}"


def assert_not_faster(doc: dict, honest_speedup: float = 1.0, margin: float | None = None) -> None:
    """Not `correct`, or a speedup within `margin` (default: SPEED_MARGIN of the document's mode) x
    the honest one (1.0: the attack's honest work is the reference itself)."""
    if doc["status"] != "correct":
        return
    margin = SPEED_MARGIN[doc["mode"]] if margin is None else margin
    got = speedup(doc)
    assert got is not None and got <= margin * honest_speedup, (
        f"speedup {got} exceeds {margin} x the honest {honest_speedup:.3g}: {summary(doc)}"
    )


def assert_reference_not_reached(doc: dict, delay_us: float) -> None:
    """For an attack that delays each of the reference's calls by `delay_us` where it can reach
    it: not `correct`, or a reference time well under that delay. The delay is the attack's whole
    effect, so its absence is proved directly, whatever the offsets between processes do to the speedup
    (an honest all-reduce of one rank read 4 to 100 us per call across evaluations on an H100)."""
    if doc["status"] != "correct":
        return
    got = reference_us(doc)
    assert got is not None and got < delay_us / 2, f"the reference took {got} us per call: the attack reached it: {summary(doc)}"


def assert_time_includes(doc: dict, floor_us: float) -> None:
    """Not `correct`, or a solution time of at least `floor_us`: the time the solution provably
    spent per call (sleeping) is in its reported time, whatever it did to the clocks."""
    if doc["status"] != "correct":
        return
    got = solution_us(doc)
    assert got is not None and got >= floor_us, f"solution time {got} us below the {floor_us:.0f} us it spent: {summary(doc)}"


def assert_document_bounded(doc: dict, limit_s: float) -> None:
    assert doc["_wall_s"] <= limit_s, f"the document took {doc['_wall_s']:.1f} s (limit {limit_s:.0f} s)"
    assert len(doc["log_tail"]) <= LOG_TAIL_LIMIT, f"log tail of {len(doc['log_tail'])} characters"


def assert_secret_absent(doc: dict, *secrets: str) -> None:
    for secret in secrets:
        for field in ("log_tail", "reason"):
            assert secret not in doc[field], f"the secret {secret[:12]}... reached the document's {field}"


def sandbox_missing() -> str | None:
    """Why the players are not known to run in a sandbox here (None when evaluator.isolation
    exists and its probe() reports it usable)."""
    import evaluator.launch

    try:
        from evaluator import isolation
    except ImportError as exc:
        return f"evaluator.isolation cannot be imported ({exc})"
    # Only the evaluator that `evaluate` comes from counts (not a module of another checkout that
    # an installed path happens to provide).
    if Path(isolation.__file__).resolve().parent != Path(evaluator.launch.__file__).resolve().parent:
        return f"evaluator.isolation ({isolation.__file__}) is not part of the evaluator under test"
    probe = getattr(isolation, "probe", None)
    if not callable(probe):
        return "evaluator.isolation has no probe()"
    try:
        reason = probe()
    except Exception as exc:  # noqa: BLE001 - any failure means: not known to be safe
        return f"evaluator.isolation.probe() failed: {exc!r}"
    return None if reason is None else f"evaluator.isolation.probe(): {reason}"


@pytest.fixture
def sandboxed() -> None:
    """Skips a test whose attack could harm this machine or the test runner without the sandbox."""
    reason = sandbox_missing()
    if reason is not None:
        pytest.skip(f"only run inside the players' sandbox: {reason}")


def runner_identity() -> dict[str, int]:
    """What the attacks that send signals are told about the test process, so that they refuse
    to act where they could reach it (their own guard, on top of the `sandboxed` fixture)."""
    stat = Path("/proc/self/stat").read_text()
    start = int(stat.rsplit(")", 1)[1].split()[19])  # field 22: start time in clock ticks
    return {"RUNNER_PID": os.getpid(), "RUNNER_PGID": os.getpgid(0), "RUNNER_START": start}


_SELF = sys.modules[__name__]  # while this file runs, "conftest" is this module


@pytest.fixture(scope="session")
def adv():
    """This module: judge, honest, the assertions and the settings above."""
    return _SELF
