"""One rank of an evaluation (started as `python -m evaluator.rank CONTROL_FD RESULT_FD`).

The parent writes a configuration line and then the trial seeds on the control pipe; each seed is
read only when its inputs are made, and carries a sequence number, so a solution that reads the pipe
ahead is caught. Messages go back on the result pipe, each tagged with a per-evaluation nonce; the
parent computes every statistic itself. Stdout and stderr are only logs.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
import traceback
from collections.abc import Callable
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from evaluator import checks, timing
from evaluator.loading import LoadedProblem, failure_kind, load_problem, load_solution
from tasks.spec import InputContext

TIMING_MEMORY_BYTES = {"cpu": 256 << 20, "shared-gpu": 512 << 20, "gpu": 4 << 30}
MAX_TIMING_SETS = 128
WARMUP_SETS = 4
ROUNDS = 10  # alternate often: host-side drift on shared machines then hits both sides alike
TIMING_ATTEMPTS = 3  # measure again after a stall, at most twice (see time_sides)


def draw_inputs(problem: LoadedProblem, rank: int, world: int, dims: dict, seed: int, shared_seed: int,
                device: torch.device, portable: bool = False) -> tuple:
    """One rank's inputs of `problem` from generators on `device` seeded with `seed` (this rank's)
    and `shared_seed` (the same on every rank): what every trial, timing set and public trial runs."""
    rng = torch.Generator(device=device)
    rng.manual_seed(seed)
    shared = torch.Generator(device=device)
    shared.manual_seed(shared_seed)
    # A bitwise problem's public-trial digests are compared across hardware (and with `cpu`
    # mode's), so those draws must be the same bits on every host CPU too.
    portable_draws = portable and problem.bitwise
    ctx = InputContext(rank, world, dims, problem.dtype, device, rng, shared, portable_draws)
    made = problem.make_inputs(ctx)
    return tuple(made) if isinstance(made, (tuple, list)) else (made,)


class Verdict(Exception):
    """Ends the evaluation on this rank with a status (raised on the rank that found it)."""

    def __init__(self, status: str, reason: str, detail: str = "", origin: int | None = None):
        super().__init__(reason)
        self.status, self.reason, self.detail, self.origin = status, reason, detail, origin


class HostError(Exception):
    """The machine cannot run this evaluation (missing GPUs): not the solution's fault."""


class Channel:
    def __init__(self, control_fd: int, result_fd: int):
        self._control_fd = control_fd
        self._result_fd = result_fd
        self.config = json.loads(self._readline())
        self._nonce = self.config.pop("nonce")
        self._seq = 0

    def _readline(self) -> bytes:
        """Unbuffered on purpose: seeds not yet needed stay in the pipe, not in this process."""
        line = bytearray()
        while True:
            byte = os.read(self._control_fd, 1)
            if not byte or byte == b"\n":
                return bytes(line)
            line += byte

    def next_seed(self, kind: str) -> dict:
        try:
            line = self._readline()
            msg = json.loads(line) if line else {}
        except (OSError, ValueError):
            msg = {}
        if msg.get("seq") != self._seq or msg.get("kind") != kind:
            raise Verdict("rejected", "the evaluator's input channel was read by someone else (seeds out of sequence)")
        self._seq += 1
        return msg

    def send(self, message: dict) -> None:
        data = (json.dumps({"nonce": self._nonce, **message}) + "\n").encode()
        view = memoryview(data)
        while view:
            view = view[os.write(self._result_fd, view):]


class Stages:
    """Wall seconds spent per stage, for the evaluator's own benchmark."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    @contextmanager
    def __call__(self, name: str):
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - t0


# Functions the harness relies on; a solution that replaces one is rejected.
GUARDED = [
    (time, "perf_counter"), (time, "perf_counter_ns"), (torch.cuda, "synchronize"), (torch.cuda.Event, "record"),
    (torch.cuda.Event, "elapsed_time"), (dist, "barrier"), (dist, "all_gather_object"), (torch, "equal"),
    (torch.Tensor, "clone"), (torch.Tensor, "copy_"), (checks, "compare_outputs"), (checks, "digest"),
]


class Harness:
    def __init__(self, channel: Channel):
        self.channel = channel
        cfg = channel.config
        self.cfg = cfg
        self.rank, self.world = cfg["rank"], cfg["world_size"]
        self.mode = cfg["mode"]
        self.stages = Stages()
        self.on_gpu = self.mode != "cpu"
        self.group: Any = None
        self.problem: LoadedProblem | None = None
        self.solution: Callable | None = None
        self._guarded = [(owner, name, getattr(owner, name)) for owner, name in GUARDED]
        self._threads = set(threading.enumerate())
        self.reported = False

    # -- set-up ---------------------------------------------------------------------------------
    def start(self) -> None:
        with self.stages("init"):
            if self.mode == "gpu":
                if torch.cuda.device_count() <= self.rank:
                    raise HostError(f"gpu mode needs {self.world} GPUs, found {torch.cuda.device_count()}")
                self.device = torch.device("cuda", self.rank)
            elif self.mode == "shared-gpu":
                if not torch.cuda.is_available():
                    raise HostError("shared-gpu mode needs a CUDA GPU")
                self.device = torch.device("cuda", 0)
            else:
                self.device = torch.device("cpu")
            if self.on_gpu:
                torch.cuda.set_device(self.device)
            timeout = timedelta(seconds=self.cfg["timeout_s"])
            backend = "nccl" if self.mode == "gpu" else "gloo"
            kwargs = {"device_id": self.device} if self.mode == "gpu" else {}
            dist.init_process_group(
                backend, init_method=f"file://{self.cfg['store']}", rank=self.rank, world_size=self.world,
                timeout=timeout, **kwargs,
            )
            # The harness's own coordination never shares a communicator with the solution.
            self.group = dist.new_group(backend="gloo", timeout=timeout)
            self.problem = load_problem(self.cfg["problem"])

    def progress(self, stage: str, **detail: Any) -> None:
        if self.rank == 0:
            self.channel.send({"type": "progress", "stage": stage, **detail})

    def agree(self, failure: Verdict | None) -> None:
        """All ranks learn whether any rank failed; the lowest failing rank's verdict wins."""
        mine = None if failure is None else (failure.status, failure.reason, failure.detail)
        gathered: list[Any] = [None] * self.world
        dist.all_gather_object(gathered, (self.rank, mine), group=self.group)
        for rank, verdict in gathered:
            if verdict is not None:
                status, reason, detail = verdict
                raise Verdict(status, reason, detail, origin=rank)

    def build(self) -> None:
        """Rank 0 imports (and so builds) the solution first; the others then load the cached build."""
        self.progress("building")
        with self.stages("build"):
            for turn in (0, 1):
                failure = None
                if (self.rank == 0) == (turn == 0):
                    try:
                        self.solution = load_solution(Path(self.cfg["solution"]))
                    except BaseException as exc:  # noqa: BLE001 - any failure of user code is reported
                        failure = Verdict(failure_kind(exc), f"importing the solution failed: {type(exc).__name__}: {exc}",
                                          traceback.format_exc())
                self.agree(failure)
        self.check_integrity()

    # -- inputs and calls -----------------------------------------------------------------------
    def inputs(self, dims: dict, seed: int, shared_seed: int, portable: bool = False) -> tuple:
        """Inputs from seeded generators. `portable` draws them on the CPU and moves them to the
        device, so the same seed gives the same bits on any GPU (CUDA generators' streams can
        depend on the device's multiprocessor count)."""
        device = torch.device("cpu") if portable else self.device
        made = draw_inputs(self.problem, self.rank, self.world, dims, seed, shared_seed, device, portable)
        return checks.to_device(made, self.device) if portable else made

    def sync(self) -> None:
        if self.on_gpu:
            torch.cuda.synchronize()

    def call_solution(self, inputs: tuple) -> Any:
        try:
            out = self.solution(*inputs)
            self.sync()
            return out
        except BaseException as exc:  # noqa: BLE001
            raise Verdict(failure_kind(exc), f"solution raised {type(exc).__name__}: {exc}", traceback.format_exc()) from None

    def check_integrity(self) -> None:
        for owner, name, original in self._guarded:
            if getattr(owner, name) is not original:
                raise Verdict("rejected", f"the solution replaced {getattr(owner, '__name__', owner)}.{name}")
        for thread in set(threading.enumerate()) - self._threads:
            target = getattr(thread, "_target", None)
            if thread.is_alive() and getattr(target, "__module__", "") == "pkb_solution":
                raise Verdict("rejected", f"the solution left a background thread running ({thread.name})")

    def trial(self, dims: dict, seed_msg: dict, reuse: tuple | None = None) -> tuple[float, Any]:
        """One checked call on fresh inputs. With `reuse`, the fresh values are copied into those
        existing tensors first (same addresses), so a cache keyed on pointers returns stale results."""
        fresh = self.inputs(dims, seed_msg["seed"], seed_msg["shared_seed"])
        if reuse is not None:
            fresh = checks.reuse_storage(reuse, fresh)
        pristine = checks.clone_tree(fresh)
        ref_inputs = checks.clone_tree(fresh)
        failure = None
        max_err = 0.0
        out = None
        try:
            out = self.call_solution(fresh)
            try:
                expected = self.problem.reference(*ref_inputs)
                self.sync()
            except Exception as exc:  # noqa: BLE001
                raise Verdict("runtime_error", f"the reference raised {type(exc).__name__}: {exc}",
                              traceback.format_exc()) from None
            allowed = self.problem.mutates
            if allowed is None:  # public-suite problems: allow what the reference itself modifies
                allowed = tuple(i for i, (a, b) in enumerate(zip(pristine, ref_inputs))
                                if checks.changed_inputs((a,), (b,), ()) is not None)
            message, max_err = checks.compare_outputs(out, expected, self.problem.tolerance_for)
            if message is None:
                message = checks.changed_inputs(pristine, fresh, allowed)
            if message is None:
                n_outputs = len(expected) if isinstance(expected, (tuple, list)) else 1
                message, inplace_err = checks.compare_inplace(fresh, ref_inputs, allowed, n_outputs,
                                                              self.problem.tolerance_for)
                max_err = max(max_err, inplace_err)
            if message is not None:
                failure = Verdict("incorrect", message)
        except Verdict as verdict:
            failure = verdict
        if failure is not None and failure.status != "incorrect" and not self.cfg.get("selfcheck"):
            # The other ranks may be stuck inside a collective of the solution: report now.
            self.report(failure)
        self.agree(failure)
        self.check_integrity()
        return max_err, out

    # -- the evaluation -------------------------------------------------------------------------
    def evaluate_shape(self, shape: dict) -> dict:
        dims = shape["dims"]
        result: dict[str, Any] = {"name": shape["name"], "notes": []}
        self.progress("checking", shape=shape["name"])
        with self.stages("correctness"):
            worst = 0.0
            for _ in range(self.cfg["trials"]):
                err, _ = self.trial(dims, self.channel.next_seed("trial"))
                worst = max(worst, err)
        if self.cfg["iters"] > 0:
            self.progress("timing", shape=shape["name"])
            timing_seed = self.channel.next_seed("timing")
            with self.stages("inputs"):
                sets = self.timing_sets(dims, timing_seed)
            with self.stages("warmup"):
                warm = sets[:WARMUP_SETS]
                timing.warm_up(self.solution, warm, self.cfg["warmup"], self.on_gpu)
                timing.warm_up(self.problem.reference, warm, self.cfg["warmup"], self.on_gpu)
                timed = sets[WARMUP_SETS:] or warm
            with self.stages("timing"):
                timed_sides = self.time_sides(timed, result["notes"])
            self.check_integrity()
            for side, data in timed_sides.items():
                result[f"{side}_us"] = data["samples_us"]
                result["notes"] += [f"{side}: {n}" for n in data["notes"]]
            with self.stages("post_check"):
                err, _ = self.trial(dims, self.channel.next_seed("post"), reuse=timed[0])
                worst = max(worst, err)
            del sets, timed, warm
        with self.stages("digest"):
            public = self.channel.next_seed("public")
            fresh = self.inputs(dims, public["seed"], public["shared_seed"], portable=True)
            ref_inputs = checks.clone_tree(fresh)
            out = self.call_solution(fresh)
            result["digest_solution"] = checks.digest(out)
            result["digest_reference"] = checks.digest(self.problem.reference(*ref_inputs))
        result["max_abs_error"] = worst
        return result

    def time_sides(self, timed: list[tuple], notes: list[str]) -> dict:
        """Solution and reference side by side; while any rank saw a stall, measured again
        (TIMING_ATTEMPTS in all), keeping the attempt that lost the least time to stalls. A cost
        the solution pays on some of its calls recurs in every attempt and stays in; a random
        stall does not."""
        best, best_stall_us, attempts = None, 0.0, 0
        while attempts < TIMING_ATTEMPTS and (best is None or best_stall_us > 0):
            attempts += 1
            sides = timing.side_by_side(
                {"solution": self.solution, "reference": self.problem.reference},
                timed, self.cfg["iters"], ROUNDS, self.on_gpu, self.align,
            )  # fmt: skip
            mine = sum(timing.stall_us(side["samples_us"]) for side in sides.values())
            lost: list[Any] = [None] * self.world
            dist.all_gather_object(lost, mine, group=self.group)  # every rank takes the same branch
            if best is None or sum(lost) < best_stall_us:
                best, best_stall_us = sides, sum(lost)
        if attempts > 1:
            notes.append(
                f"timing measured {attempts} times after stalls (iterations over {timing.STALL_FACTOR:g}x the "
                f"median); kept the attempt that lost the least to them ({best_stall_us / 1e3:.1f} ms)"
            )
        return best

    def timing_sets(self, dims: dict, seed_msg: dict) -> list[tuple]:
        """Distinct input sets, as many as memory allows up to one per timed iteration, plus a
        few for warm-up, so that neither L2 nor a cache keyed on pointers or content helps."""
        first = self.inputs(dims, seed_msg["seed"], seed_msg["shared_seed"])
        size = max(1, checks.nbytes(first))
        wanted = WARMUP_SETS + min(self.cfg["iters"], MAX_TIMING_SETS)
        count = max(2, min(wanted, TIMING_MEMORY_BYTES[self.mode] // size))
        sets = [first]
        for i in range(1, count):
            sets.append(self.inputs(dims, seed_msg["seed"] + i, seed_msg["shared_seed"] + i))
        self.sync()
        return sets

    def align(self) -> None:
        self.sync()
        dist.barrier(group=self.group)

    def environment(self) -> dict:
        env = {
            "python": sys.version.split()[0],
            "torch": torch.__version__,
            "cuda": torch.version.cuda,
            "mode": self.mode,
            "world_size": self.world,
            "hostname": os.uname().nodename,
        }
        try:
            import importlib.metadata as md

            env["triton"] = md.version("triton")
        except Exception:  # noqa: BLE001
            env["triton"] = None
        if torch.cuda.is_available():
            env["gpu_name"] = torch.cuda.get_device_name(self.device if self.on_gpu else 0)
            env["gpu_count"] = torch.cuda.device_count()
            env["nccl"] = ".".join(map(str, torch.cuda.nccl.version()))
        return env

    def report(self, verdict: Verdict | None, shapes: list | None = None) -> None:
        if self.reported:
            return
        self.reported = True
        message = {"type": "final", "rank": self.rank, "stages": self.stages.seconds, "shapes": shapes or []}
        if verdict is None:
            message["status"] = "correct"
        else:
            origin = self.rank if verdict.origin is None else verdict.origin
            message.update(status=verdict.status, reason=verdict.reason, detail=verdict.detail[-8000:], origin=origin)
        if self.rank == 0:
            message["environment"] = self.environment()
        self.channel.send(message)

    def run(self) -> None:
        self.start()
        self.build()
        shapes = []
        try:
            for shape in self.cfg["shapes"]:
                shapes.append(self.evaluate_shape(shape))
        except Verdict as verdict:
            self.report(verdict, shapes)
            return
        self.progress("done")
        self.report(None, shapes)


def main(argv: list[str]) -> int:
    channel = Channel(int(argv[0]), int(argv[1]))
    harness = Harness(channel)
    try:
        if channel.config.get("selfcheck"):
            from evaluator.selfcheck import run_rank

            run_rank(harness)
        else:
            harness.run()
    except Verdict as verdict:
        harness.report(verdict)
    except HostError as exc:
        channel.send({"type": "infra", "rank": harness.rank, "reason": str(exc)})
        return 3
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
    # Skip interpreter teardown: a solution's leftovers must not hang the exit.
    os._exit(0)

