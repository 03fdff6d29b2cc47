"""The judge of one rank (started as `python -m evaluator.rank CONTROL RESULT SOLUTION REFERENCE`,
four file descriptors).

The judge is trusted: it never imports, unpickles or calls anything of the submission. It draws
every input from secret seeds, writes it into an arena its players map, and asks its two players,
one running the solution and one the reference (each in a sandbox of its own, see
evaluator/player.py), to run calls on it. It reads their outputs back from its arenas and checks
every call of the solution against the reference's call on the same inputs. Time is its own
clock over batches of calls, from writing the batch's inputs until it has read the outputs
back: work that a player leaves running past its "done" is either inside that time or makes the
outputs it reads wrong.

Seeds come on the control pipe one at a time, with sequence numbers; reports go back on the
result pipe, each tagged with a per-evaluation nonce. The parent computes every statistic.
"""

from __future__ import annotations

import json
import math
import os
import socket
import sys
import time
import traceback
from collections.abc import Callable
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist

from evaluator import checks, gpu_memory, placement, timing_stats, transport
from evaluator.freezer import Freezer
from evaluator.gpu_lock import GpuLocker, LockUnavailable
from evaluator.isolation_init import descendants
from evaluator.loading import LoadedProblem, load_problem
from evaluator.placement import Placement
from evaluator.results import SIDES, FailureKind, Mode, Side, Stage, StageTime, Status
from evaluator.timed_pairs import (
    TIMED_KEYS,
    across_ranks,
    allocator_change,
    allocator_reading,
    fixed_cost_ns,
    pair_schedule,
    per_call_us,
)
from tasks.spec import InputContext, Tolerance

# Memory one rank's judge gives a timed batch: its input sets, both players' arenas and the copies
# it reads back. On a GPU shared by every rank (shared-gpu), each rank gets a part.
BATCH_MEMORY_BYTES = {Mode.CPU: 256 << 20, Mode.SHARED_GPU: 1 << 30, Mode.GPU: 4 << 30}
MAX_BATCH = 200  # calls per timed batch
BATCH_TARGET_S = 0.02  # a timed batch of the faster side lasts about this long, where it can
BATCH_LIMIT_S = 0.25  # and one of the slower side at most this long
WARMUP_BUDGET_S = 1.0  # warm-up ends after this long even if fewer than `warmup` calls ran
MIN_TIMED_BATCHES = 10  # the timed calls are split into at least this many batches per side
CANARY = 0xFF  # fills output slots before each batch: NaN in floats, -1 in integers
OUTPUT_MARGIN = 1.25  # room over the reference's largest output seen, for data-dependent sizes
OVERFLOW_RETRIES = 3


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

    def __init__(self, status: Status, reason: str, detail: str = "", origin: int | None = None,
                 failure: dict | None = None, gone: str | None = None):
        super().__init__(reason)
        self.status, self.reason, self.detail, self.origin = status, reason, detail, origin
        self.failure = failure or {}  # where, on the rank that found it: results.Failure's fields
        # The side whose player process ended without answering: the cause, not a consequence,
        # of its peers' failures (the parent adds how the process ended).
        self.gone = gone


class HostError(Exception):
    """The machine cannot run this evaluation (missing GPUs): not the solution's fault."""


class ReferenceOutOfMemory(Exception):
    """The reference's player ran out of GPU memory (gpu_memory.reads_as_out_of_memory): whose
    failure that is depends on who holds the GPU's memory (Judge.reference_out_of_memory_verdict),
    which the link cannot see."""

    def __init__(self, reason: str, detail: str):
        super().__init__(reason)
        self.reason, self.detail = reason, detail


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
            raise Verdict(Status.REJECTED, "the evaluator's input channel was read by someone else (seeds out of sequence)")
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


class Link:
    """The judge's end of one player. Every answer is checked; an answer that is not one of the
    protocol's, or none at all, ends the evaluation."""

    def __init__(self, fd: int, side: str, device: torch.device):
        self.sock = socket.socket(fileno=fd)
        self.side = side
        self.device = device
        self.arenas: dict[str, transport.Arena] = {}

    @property
    def who(self) -> str:
        return "the solution" if self.side == "solution" else "the reference"

    def send(self, message: dict, fds: tuple[int, ...] = ()) -> None:
        try:
            transport.send(self.sock, message, fds)
        except OSError:
            raise Verdict(Status.RUNTIME_ERROR, f"{self.who}'s process ended without answering ({message['op']})",
                          gone=self.side) from None

    def answer(self, op: str) -> dict:
        try:
            reply, _ = transport.recv(self.sock)
        except (EOFError, OSError):
            raise Verdict(Status.RUNTIME_ERROR, f"{self.who}'s process ended without answering ({op})",
                          gone=self.side) from None
        except transport.ProtocolError as exc:
            raise Verdict(Status.REJECTED, f"{self.who}'s process broke the evaluator's protocol: {exc}") from None
        if reply.get("ok") is True:
            return reply
        reason = str(reply.get("reason", "no reason given"))[:2000]
        detail = str(reply.get("traceback", ""))[-8000:]
        if reply.get("ok") is not False:
            raise Verdict(Status.REJECTED, f"{self.who}'s process broke the evaluator's protocol: {reply!r:.200}")
        if self.side == "reference":
            if gpu_memory.reads_as_out_of_memory(reason):  # the reference's own player names the type (player.serve)
                raise ReferenceOutOfMemory(reason, detail)
            raise Verdict(Status.RUNTIME_ERROR, f"the reference raised {reason}", detail)
        loading_kinds = (FailureKind.COMPILE_ERROR, FailureKind.RUNTIME_ERROR)  # what a player may name
        kind = Status(reply["kind"]) if reply.get("kind") in loading_kinds else Status.RUNTIME_ERROR
        prefix = "importing the solution failed" if op == "load" else "solution raised"
        raise Verdict(kind, f"{prefix}: {reason}" if op == "load" else f"{prefix} {reason}", detail)

    def request(self, message: dict, fds: tuple[int, ...] = ()) -> dict:
        self.send(message, fds)
        return self.answer(message["op"])

    def ensure_arena(self, name: str, nbytes: int) -> transport.Arena:
        """An arena of at least `nbytes` that the player maps as `name`; a larger one replaces it
        (the old one stays allocated: the player may still map it)."""
        arena = self.arenas.get(name)
        if arena is None or arena.nbytes < nbytes:
            arena = transport.Arena.create(int(nbytes * 1.25) if arena else nbytes, self.device)
            self.arenas[name] = arena
            desc, fds = arena.export()
            self.request({"op": "arena", "id": name, "desc": desc}, fds)
        return arena


class Batch:
    """K calls on K input sets: what both sides run, the judge's record of what it wrote, and
    what it read back."""

    def __init__(self, sets: list[tuple]):
        self.sets = sets
        self.read: dict[str, list[Any]] = {}  # side -> outputs per call (the judge's copies)
        self.after: dict[str, list[Any]] = {}  # side -> inputs per call as the player left them
        self.stamps: dict[str, tuple[int, int]] = {}  # side (or "null") -> the judge's clock at start and end
        self.overflow = 0  # bytes the reference needed beyond its slots (data-dependent sizes)

    def ns(self, key: str) -> int:
        start, end = self.stamps[key]
        return end - start


class Judge:
    def __init__(self, channel: Channel, fds: list[int]):
        self.channel = channel
        cfg = channel.config
        self.cfg = cfg
        self.rank, self.world = cfg["rank"], cfg["world_size"]
        self.mode = cfg["mode"]
        self.stages = Stages()
        self.on_gpu = self.mode != Mode.CPU
        self.problem: LoadedProblem | None = None
        self.player_fds = fds
        self.placements = [Placement(*map(tuple, (p["judge"], p["players"], p["loading"])))
                           for p in cfg.get("placements") or []]  # the players' CPUs (evaluator/placement.py)
        self.links: dict[str, Link] = {}
        self.out_capacity = 0
        self.null_shapes: Any = None  # the outputs the reference's player returns from null calls
        self.staging: transport.Arena | None = None  # where a batch's inputs wait for the clock
        self.freezer: Freezer | None = None  # rank 0's, made in start(): see hold_solution
        self.solution_frozen = False
        self.snapshots: dict[str, transport.Arena] = {}  # the judge's copies of output slots (snapshot_of)
        self.new_groups: list[list[int]] = []
        self.reported = False
        self.player_layout: str | None = None  # "fixed", "random" or "mixed", as the players said at init
        self.where: dict[str, Any] = {"shape": None, "step": "start"}  # what runs now, for a failure's report

    # -- set-up ---------------------------------------------------------------------------------
    def start(self) -> None:
        with self.stages(StageTime.INIT):
            if self.mode == Mode.GPU:
                if torch.cuda.device_count() <= self.rank:
                    raise HostError(f"gpu mode needs {self.world} GPUs, found {torch.cuda.device_count()}")
                self.device = torch.device("cuda", self.rank)
            elif self.mode == Mode.SHARED_GPU:
                if not torch.cuda.is_available():
                    raise HostError("shared-gpu mode needs a CUDA GPU")
                self.device = torch.device("cuda", 0)
            else:
                self.device = torch.device("cpu")
            if self.on_gpu:
                torch.cuda.set_device(self.device)
            if (root := self.cfg.get("solution_root")) and self.rank == 0:
                try:
                    placed = {c for p in self.placements for c in p.players} if self.placements else None
                    self.freezer = Freezer(root, GpuLocker() if self.on_gpu else None, placed)
                except LockUnavailable as exc:
                    raise HostError(f"this host cannot hold the solution's GPU work while the reference is timed: {exc}") from None
            # The judges' own group: they coordinate among themselves, never with the players.
            dist.init_process_group("gloo", init_method=f"file://{self.cfg['store']}", rank=self.rank,
                                    world_size=self.world, timeout=timedelta(seconds=self.cfg["timeout_s"]))
            self.links = {side: Link(fd, side, self.device) for side, fd in zip(SIDES, self.player_fds)}
            init = {"op": "init", "rank": self.rank, "world": self.world, "timeout_s": self.cfg["timeout_s"],
                    "backend": "nccl" if self.mode == Mode.GPU else "gloo",
                    "device": str(self.device)}
            for side, link in self.links.items():
                link.send({**init, "store": self.cfg["player_stores"][side]})
            layouts = {link.answer("init").get("layout") for link in self.links.values()}
            if None not in layouts:  # a side that could not tell leaves it unknown
                self.player_layout = layouts.pop() if len(layouts) == 1 else "mixed"
        self.select_problem(self.cfg["problem"])

    def select_problem(self, source: dict) -> None:
        self.problem = load_problem(source)
        self.out_capacity = 0

    def progress(self, stage: str, **detail: Any) -> None:
        if self.rank == 0:
            self.channel.send({"type": "progress", "stage": stage, **detail})

    def agree(self, failure: Verdict | None) -> None:
        """All ranks learn whether any rank failed; the lowest failing rank's verdict wins."""
        mine = None if failure is None else (failure.status, failure.reason, failure.detail, failure.failure,
                                             failure.gone)
        gathered: list[Any] = [None] * self.world
        dist.all_gather_object(gathered, (self.rank, mine))
        for rank, verdict in gathered:
            if verdict is not None:
                status, reason, detail, where, gone = verdict
                raise Verdict(status, reason, detail, origin=rank, failure=where, gone=gone)

    def guarded(self, fn, *args):
        """Runs a step; a failure other than wrong outputs is reported at once (the other ranks'
        players may be stuck in a collective with this one's), then all ranks agree. A selfcheck
        goes on to its next problem after a failure, unless a player process is gone: then the
        launch cannot go on, and the report ends it (evaluator/selfcheck.py starts another)."""
        failure = None
        result = None
        try:
            result = fn(*args)
        except Verdict as verdict:
            failure = verdict
        except ReferenceOutOfMemory as exc:  # a HostError from here ends the rank (main)
            failure = self.reference_out_of_memory_verdict(exc)
        if (failure is not None and failure.status != Status.INCORRECT
                and (not self.cfg.get("selfcheck") or failure.gone is not None)):
            self.report(failure)
        self.agree(failure)
        return result

    def load(self, side: str, target: dict, perturb: bool = False) -> None:
        self.links[side].request({"op": "load", "target": target, "perturb": perturb})

    def build(self) -> None:
        """Rank 0's player imports (and so builds) the solution first; the others then load the
        cached build."""
        self.progress(Stage.BUILDING)
        self.where = {"shape": None, "step": "build"}
        with self.stages(StageTime.BUILD):
            self.guarded(self.load, "reference", self.cfg["reference"])
            for turn in (0, 1):
                if (self.rank == 0) == (turn == 0):
                    self.guarded(self.load, "solution", self.cfg["solution"])
                else:
                    self.agree(None)
            self.guarded(self.settle_players)

    def settle_players(self) -> None:
        """Every rank's players, loaded, onto the CPU their rank's two sides share while timed
        (evaluator/placement.py); rank 0 moves them all."""
        if self.rank != 0 or not self.placements:
            return
        if self.cfg.get("reference_root") and (left := placement.settle(self.cfg["reference_root"], self.placements)):
            raise HostError(f"the reference's players could not be moved onto their CPUs: {', '.join(left[:8])}")
        if self.cfg.get("solution_root") and (left := placement.settle(self.cfg["solution_root"], self.placements)):
            # Threads that keep starting where they loaded, faster than the judge moves them.
            raise Verdict(Status.REJECTED, "the solution's threads could not be moved onto the CPU its rank's "
                          f"reference shares with it (thread, CPUs): {', '.join(left[:8])}")

    # -- inputs ---------------------------------------------------------------------------------
    def inputs(self, dims: dict, seed: int, shared_seed: int, portable: bool = False) -> tuple:
        """Inputs from seeded generators. `portable` draws them on the CPU and moves them to the
        device, so the same seed gives the same bits on any GPU (CUDA generators' streams can
        depend on the device's multiprocessor count). Process groups the problem creates are
        recorded, so the players create the same ones."""
        device = torch.device("cpu") if portable else self.device
        original = dist.new_group

        def recording_new_group(ranks=None, *args, **kwargs):
            self.new_groups.append(list(range(self.world)) if ranks is None else sorted(ranks))
            return original(ranks, *args, **kwargs)

        dist.new_group = recording_new_group
        try:
            made = draw_inputs(self.problem, self.rank, self.world, dims, seed, shared_seed, device, portable)
        finally:
            dist.new_group = original
        if self.new_groups:
            create, self.new_groups = self.new_groups, []
            for link in self.links.values():
                link.request({"op": "groups", "create": create})
        return checks.to_device(made, self.device) if portable else made

    def sync(self) -> None:
        if self.on_gpu:
            torch.cuda.synchronize(self.device)

    # -- running calls --------------------------------------------------------------------------
    def stage_inputs(self, link: Link, sets: list[tuple]) -> tuple[list[Any], int]:
        """The batch's inputs laid out as they will lie in the player's arena, in the judge's own
        staging memory: their descriptions and the bytes they take. The player may map its views
        before the clock starts, but sees no input byte until the judge copies the staged bytes
        over, in one copy."""
        try:
            sizes = [transport.input_bytes(s) for s in sets]
        except transport.Unsupported as exc:
            raise HostError(f"the problem's inputs cannot be sent to a player: {exc}") from None
        arena = link.ensure_arena("in", sum(sizes))
        if self.staging is None or self.staging.nbytes < arena.nbytes:
            self.staging = transport.Arena.private(arena.nbytes, self.device)
        trees, offset = [], 0
        try:
            for s in sets:
                tree, offset = transport.encode_inputs(list(s), self.staging, offset, [])
                trees.append(tree)
        except transport.Unsupported as exc:
            raise HostError(f"the problem's inputs cannot be sent to a player: {exc}") from None
        return trees, offset

    def run_side(self, side: str, batch: Batch, timed: bool, checked: bool = True, null: bool = False) -> None:
        """One side's calls on the batch's inputs. The player maps the inputs' places first; the
        clock runs from copying the inputs in until the judge's snapshot of the output slots is
        complete (one copy each way: the protocol's cost inside the window is two copies, two
        messages and, per call, the player's copy of its outputs into their slot). The snapshot
        is read and checked after the clock stops. A null batch (the reference's player, with
        calls that return outputs of the right shapes at once) measures that cost: batch.ns("null")."""
        link = self.links[side]
        if timed:
            self.hold_solution(side != Side.SOLUTION)
        k, cap = len(batch.sets), self.out_capacity
        two_phase = cap == 0
        if not two_phase:
            out = link.ensure_arena("out", k * cap)
            out.data[: k * cap].fill_(CANARY)
        trees, used = self.stage_inputs(link, batch.sets)
        arena_in = link.arenas["in"]
        link.request({"op": "prepare", "null": null, "flush_mib": self.cfg.get("flush_l2_mib") or 0, "calls": [
            {"args": tree, "slot": None if two_phase else [i * cap, cap]} for i, tree in enumerate(trees)]})
        self.sync()
        if timed:
            dist.barrier()
        t0 = time.perf_counter_ns()
        arena_in.data[:used].copy_(self.staging.data[:used])
        self.sync()
        reply = link.request({"op": "run"})
        if two_phase:
            needed = [self._needed(side, r, batch) for r in self._outputs(reply, k)]
            cap = transport.aligned(max(needed, default=0)) or transport.ALIGN
            out = link.ensure_arena("out", k * cap)
            reply = link.request({"op": "deliver", "slots": [[i * cap, cap] for i in range(k)]})
        snapshot = self.snapshot_of(out, k * cap, "null" if null else side)
        self.sync()
        batch.stamps["null" if null else side] = (t0, time.perf_counter_ns())
        read = [self.read_outputs(side, r, snapshot, i * cap, cap, batch) for i, r in enumerate(self._outputs(reply, k))]
        if null:
            return
        batch.read[side] = read
        if checked:
            batch.after[side] = [checks.clone_tree(transport.decode_inputs(t, arena_in, None, self.device)) for t in trees]

    def hold_solution(self, frozen: bool) -> None:
        """Before a timed batch: the solution's sandbox stopped for the reference's and the null
        batches, running for its own (evaluator/freezer.py), changed once every rank's previous
        batch is over. Every rank calls it at the same points, so all know the state; rank 0
        acts on it."""
        if frozen == self.solution_frozen:
            return
        dist.barrier()
        failed = []
        if self.freezer is not None:
            with self.stages(StageTime.HOLD):
                failed = self.freezer.freeze() if frozen else self.freezer.thaw()
        self.solution_frozen = frozen
        if failed:
            # Frozen: whatever runs on may be slowing the reference, so no speedup measured now is defensible.
            what = "stopped while the reference was timed" if frozen else "resumed"
            raise Verdict(Status.REJECTED, f"processes of the solution's sandbox could not be {what}: {', '.join(failed[:8])}")
        if frozen and self.freezer is not None and (moved := self.freezer.off_placement()):
            raise Verdict(Status.REJECTED, "the solution's threads widened the CPUs they may run on beyond the one "
                          "its rank's reference shares with it, so the two sides were not timed alike (thread, "
                          f"CPUs beyond: {', '.join(moved[:8])}); leave the CPU affinity as the judge sets it")

    def snapshot_of(self, out: transport.Arena, nbytes: int, key: str) -> transport.Arena:
        """The judge's copy of a batch's output slots, in a buffer kept per side (and for null
        batches): a fresh allocation inside the clock would add the host's page faults, whose cost
        varies with the machine's state, to every batch. The copy is valid until that side's
        next batch."""
        snapshot = self.snapshots.get(key)
        if snapshot is None or snapshot.nbytes < nbytes:
            snapshot = self.snapshots[key] = transport.Arena.private(nbytes, self.device)
            snapshot.data.fill_(0)  # touched now, not in the first timed batch
        snapshot.data[:nbytes].copy_(out.data[:nbytes])
        return snapshot

    def run_null(self, batch: Batch) -> None:
        """The batch on the reference's player, with null calls, after the pair or before it
        (pair_schedule), the solution stopped either way: the protocol's cost
        (writing the inputs, two messages, the loop, each output's copy into its slot and the
        judge's read of it), which the timed batches subtract. The reference's player runs only
        the judge's code and the reference, so no solution can move it."""
        self.set_null_outputs(batch)
        self.run_side(Side.REFERENCE, batch, timed=True, checked=False, null=True)

    def set_null_outputs(self, batch: Batch) -> None:
        """The outputs the reference's player returns from null calls, shaped as the batch's
        reference outputs (allocated there, outside the clock). Before the batch's reference has
        run (a null batch first), the last pair's shapes serve."""
        read = batch.read.get(Side.REFERENCE)
        shapes = transport.output_shapes(read[0]) if read else self.null_shapes
        if shapes != self.null_shapes:
            self.links[Side.REFERENCE].request({"op": "null", "outputs": shapes})
            self.null_shapes = shapes

    def _outputs(self, reply: dict, k: int) -> list:
        outputs = reply.get("outputs")
        if not isinstance(outputs, list) or len(outputs) != k or not all(isinstance(o, dict) for o in outputs):
            raise Verdict(Status.REJECTED, "a player answered with the wrong number of outputs")
        return outputs

    @staticmethod
    def _needed(side: str, reply: dict, batch: Batch) -> int:
        needed = reply.get("needed")
        if not isinstance(needed, int) or needed < 0:
            raise Verdict(Status.REJECTED, "a player answered with an unreadable output size")
        if side == "solution":
            # The reference ran first: outputs much larger than its are wrong, and would only
            # take the judge's memory.
            largest = max(checks.nbytes(o) for o in batch.read["reference"])
            if needed > 2 * largest + (1 << 20):
                raise Verdict(Status.INCORRECT, f"the solution's outputs take {needed} bytes, the reference's {largest}")
        return needed

    def read_outputs(self, side: str, reply: dict, arena: transport.Arena, offset: int, cap: int, batch: Batch) -> Any:
        if "overflow" in reply:
            if side == "reference":
                needed = reply["overflow"]
                batch.overflow = max(batch.overflow, needed if isinstance(needed, int) else 0)
                return None
            return transport.Opaque(f"outputs of {reply['overflow']} bytes, more than the reference's")
        try:
            views = transport.unpack_outputs(reply.get("tree"), arena, offset, cap)
        except transport.BadOutput as exc:
            if side == "reference":
                raise
            raise Verdict(Status.REJECTED, f"the solution's process described its outputs falsely: {exc}") from None
        return views  # of the judge's own snapshot

    def tolerance_for(self, output_index: int) -> Tolerance:
        return self.problem.tolerance_for(output_index, self.world)

    def check(self, batch: Batch) -> float:
        """Every call of the solution against the reference's call on the same inputs."""
        worst = 0.0
        for i, pristine in enumerate(batch.sets):
            got, expected = batch.read["solution"][i], batch.read["reference"][i]
            sol_after, ref_after = batch.after["solution"][i], batch.after["reference"][i]
            allowed, results = self.problem.mutates, self.problem.inplace_results
            if allowed is None:  # public-suite problems: what the reference itself modifies
                allowed = tuple(j for j, (a, b) in enumerate(zip(pristine, ref_after))
                                if checks.changed_inputs((a,), (b,), ()) is not None)
            if results is None:
                results = allowed
            try:
                message, err = checks.compare_outputs(got, expected, self.tolerance_for)
            except Exception as exc:  # noqa: BLE001 - whatever came back, the judge must not break on it
                message, err = f"the outputs could not be compared: {type(exc).__name__}: {exc}", float("nan")
            if message is None:
                message = checks.changed_inputs(pristine, sol_after, allowed)
            if message is None:
                n_outputs = len(expected) if isinstance(expected, (tuple, list)) else 1
                message, inplace_err = checks.compare_inplace(sol_after, ref_after, results, n_outputs,
                                                              self.tolerance_for)
                err = max(err, inplace_err)
            if message is not None:
                several = len(batch.sets) > 1
                call = f" (call {i + 1} of {len(batch.sets)})" if several else ""
                where = {"call": i + 1 if several else None, "calls": len(batch.sets) if several else None,
                         "mismatch": getattr(message, "mismatch", None)}
                raise Verdict(Status.INCORRECT, message + call, failure=where)
            worst = max(worst, err)
        return worst

    def pair(self, make_sets, timed: bool = False, order: tuple[str, ...] = SIDES,
             before: Callable[[Batch], None] | None = None) -> tuple[Batch, float]:
        """Both sides on the same fresh inputs (after `before`, given the batch), then every
        output checked. When a data-dependent output of the reference outgrew its slot on any
        rank, all ranks give the slots more room and run again on new inputs (an input set is
        never used twice)."""
        for _attempt in range(OVERFLOW_RETRIES + 1):
            batch = Batch(make_sets())
            if before is not None:
                before(batch)
            for side in order:
                self.guarded(self.run_side, side, batch, timed)
            needs: list[Any] = [None] * self.world
            dist.all_gather_object(needs, batch.overflow)
            if not any(needs):
                return batch, self.guarded(self.check, batch)
            self.out_capacity = transport.aligned(int(max(needs) * OUTPUT_MARGIN))
        raise HostError(f"the reference's outputs keep outgrowing their slots ({max(needs)} bytes)")

    # -- the evaluation -------------------------------------------------------------------------
    def evaluate_shape(self, shape: dict) -> dict:
        dims = shape["dims"]
        result: dict[str, Any] = {"name": shape["name"], "notes": []}
        self.progress(Stage.CHECKING, shape=shape["name"])
        self.out_capacity = 0  # trials deliver in two steps and size the slots for the timed calls
        largest = 0
        with self.stages(StageTime.CORRECTNESS):
            worst = 0.0
            for trial in range(self.cfg["trials"]):
                self.where = {"shape": shape["name"], "step": f"trial {trial + 1} of {self.cfg['trials']}"}
                seed = self.channel.next_seed("trial")
                batch, err = self.pair(lambda seed=seed: [self.inputs(dims, seed["seed"], seed["shared_seed"])])
                worst = max(worst, err)
                largest = max(largest, checks.nbytes(batch.read["reference"][0]))
        if self.cfg["iters"] > 0:
            self.out_capacity = transport.aligned(int(largest * OUTPUT_MARGIN)) or transport.ALIGN
            worst = max(worst, self.time_shape(dims, result))
        with self.stages(StageTime.DIGEST):
            self.where = {"shape": shape["name"], "step": "public trial"}
            public = self.channel.next_seed("public")
            self.out_capacity = 0
            batch, err = self.pair(lambda: [self.inputs(dims, public["seed"], public["shared_seed"], portable=True)])
            worst = max(worst, err)
            result["digest_solution"] = checks.digest(batch.read["solution"][0])
            result["digest_reference"] = checks.digest(batch.read["reference"][0])
        result["max_abs_error"] = worst
        return result

    def warm_up(self, sets: list[tuple], batches: int) -> tuple[float, float] | None:
        """Batches that are neither timed nor checked, on one draw of input sets (written afresh
        each time): they only bring both sides up to speed, for `warmup` calls per side or
        WARMUP_BUDGET_S, whichever ends first (rank 0's clock decides, so all ranks stop after the
        same batch). Timed calls never reuse an input. Returns the faster and the slower side's
        seconds per call on this rank, fixed cost included, to size the timed batches (None
        without warm-up)."""
        if batches < 1:
            return None
        t0 = time.perf_counter()
        fastest = {side: math.inf for side in SIDES}
        for b in range(batches):
            batch = Batch(sets)
            for side in SIDES if b % 2 == 0 else SIDES[::-1]:
                self.guarded(self.run_side, side, batch, False, False)
                fastest[side] = min(fastest[side], batch.ns(side) / 1e9 / len(sets))
            elapsed = [time.perf_counter() - t0]
            dist.broadcast_object_list(elapsed, src=0)
            if elapsed[0] >= WARMUP_BUDGET_S:
                break
        # Here, so that their allocation is not counted among the timed pairs' (timing_run.allocator).
        self.guarded(self.set_null_outputs, batch)
        return min(fastest.values()), max(fastest.values())

    def batch_size(self, dims: dict, seed: dict, call_s: tuple[float, float] | None = None) -> int:
        """Calls per batch: within memory, and for timing, enough that the faster side's batch
        lasts BATCH_TARGET_S (the protocol's fixed cost, about a millisecond, then weighs a few
        percent; a diagnostic request may set another length), but not so many that the slower
        side's lasts over BATCH_LIMIT_S. Before the warm-up has measured the calls (`call_s`
        None): the requested calls in MIN_TIMED_BATCHES."""
        sample = self.inputs(dims, seed["seed"], seed["shared_seed"])
        per_call = 5 * transport.input_bytes(list(sample)) + 4 * self.out_capacity
        budget = BATCH_MEMORY_BYTES[self.mode] // (self.world if self.mode == Mode.SHARED_GPU else 1)
        if call_s is None:
            by_time = math.ceil(self.cfg["iters"] / MIN_TIMED_BATCHES)
        else:
            fast, slow = call_s
            target_s = (self.cfg.get("batch_target_ms") or 0) / 1e3 or BATCH_TARGET_S
            by_time = min(math.ceil(target_s / fast), max(1, int(BATCH_LIMIT_S / slow)))
        sizes: list[Any] = [None] * self.world
        dist.all_gather_object(sizes, max(1, min(MAX_BATCH, by_time, budget // max(1, per_call))))
        return min(sizes)  # every rank runs the same batches

    def time_shape(self, dims: dict, result: dict) -> float:
        """Warm-up batches, then timed pairs: one batch per side on the same fresh inputs, fully
        checked, the sides alternating which goes first, each pair followed by a null batch that
        measures the protocol's cost. After the requested calls, pairs continue while the
        speedup's interval is wider than its target and the shape's time budget lasts; every judge
        decides on the same gathered samples, so all ranks stop after the same pair."""
        seed = self.channel.next_seed("timing")
        counter = iter(range(1, 1 << 62))
        k = self.batch_size(dims, seed)

        def fresh_sets(n: int) -> list[tuple]:
            sets = []
            for _ in range(n):
                i = next(counter)
                sets.append(self.inputs(dims, seed["seed"] + i, seed["shared_seed"] + i))
            self.sync()
            return sets

        worst = 0.0
        self.progress("timing", shape=result["name"])
        self.where = {"shape": result["name"], "step": "warm-up"}
        budget_s = float(self.cfg.get("timing_budget_s") or 0.0)
        with self.stages("warmup"):
            call_s = self.warm_up(fresh_sets(k), math.ceil(self.cfg["warmup"] / k))
            # Sized by time on GPUs only: there the protocol's cost is a millisecond against calls of
            # microseconds; on the CPU calls take milliseconds. A fixed schedule keeps its requested
            # calls in MIN_TIMED_BATCHES batches.
            if budget_s > 0 and self.on_gpu:
                k = self.batch_size(dims, seed, call_s)
        # A fixed schedule times exactly the requested calls. With a budget, the requested calls
        # size the batches (above) and the budget bounds the rest: where memory holds a batch to
        # fewer calls, the pairs needed to reach `iters` calls would take a slow problem's
        # evaluation past its time limit (80 pairs of one call each, 213 s for one shape on the CPU).
        min_pairs = timing_stats.MIN_PAIRS if budget_s > 0 else max(1, math.ceil(self.cfg["iters"] / k))
        # own: (reference ns, solution ns, null ns) of each pair on this rank's clock; spans: the same
        # for the problem, across ranks (across_ranks), the same on every rank
        own: list[tuple[int, ...]] = []
        spans: list[tuple[int, ...]] = []
        allocator_before = self.guarded(self.allocator_counts)
        t0 = time.perf_counter()
        self.where = {"shape": result["name"], "step": "timing"}
        with self.stages("timing"):
            stop = None
            while stop is None:
                order, null_first = pair_schedule(len(spans), self.cfg["batch_order"])
                before = (lambda b: self.guarded(self.run_null, b)) if null_first else None
                batch, err = self.pair(lambda: fresh_sets(k), timed=True, order=order, before=before)
                worst = max(worst, err)
                if not null_first:
                    self.guarded(self.run_null, batch)
                own.append(tuple(batch.ns(key) for key in TIMED_KEYS))
                gathered: list[Any] = [None] * self.world
                # Rank 0's clock decides the budget, so that every rank reads the same elapsed time.
                dist.all_gather_object(gathered, (tuple(batch.stamps[key] for key in TIMED_KEYS), time.perf_counter() - t0))
                spans.append(across_ranks([stamps for stamps, _elapsed in gathered]))
                ratio = timing_stats.paired_ratio(*per_call_us(spans, k))
                stop = timing_stats.stop_reason(ratio, len(spans), gathered[0][1], budget_s,
                                                timing_stats.MAX_PAIRS, min_pairs=min_pairs)
        self.hold_solution(False)
        result["allocator"] = allocator_change(allocator_before, self.guarded(self.allocator_counts))
        self.guarded(self.refuse_a_starved_reference, result["allocator"])
        reference_us, solution_us = per_call_us(own, k)
        result[f"{Side.REFERENCE}_us"], result[f"{Side.SOLUTION}_us"] = reference_us, solution_us
        result["across_ranks_us"] = dict(zip((Side.REFERENCE, Side.SOLUTION), per_call_us(spans, k)))
        result["batch"] = {"calls": k, "batches": len(spans), "fixed_us": fixed_cost_ns(spans) / 1e3,
                           "stop": str(stop), "seconds": time.perf_counter() - t0}
        return worst

    def refuse_a_starved_reference(self, change: dict[str, dict[str, int] | None]) -> None:
        """`rejected` where this rank's reference ran short of GPU memory while timed beside a
        solution holding more of it (gpu_memory.starved_reference): the judge's own count of the
        reference's allocator, and the driver's of both sandboxes."""
        retries = (change.get(Side.REFERENCE) or {}).get("retries", 0)
        why = self.ask_driver(gpu_memory.starved_reference, retries) if retries else None
        if why is not None:
            raise Verdict(Status.REJECTED, why)

    def allocator_counts(self) -> dict[str, dict[str, int]] | None:
        """Each side's allocator counters as its player reports them (allocator_reading); nothing
        asked on the CPU, which has no such allocator."""
        if not self.on_gpu:
            return None
        return {side: allocator_reading(self.links[side].request({"op": "allocator"}).get("allocator")) for side in SIDES}

    def environment(self) -> dict:
        env = {
            "player_layout": self.player_layout,
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
        if self.freezer is not None and self.solution_frozen:
            # Ended while the reference was timed: the solution's processes end as they were left,
            # not stopped (how they exit, and their stacks on a time-out, go into the document).
            self.freezer.thaw()
        message = {"type": "final", "rank": self.rank, "stages": self.stages.seconds, "shapes": shapes or []}
        if verdict is None:
            message["status"] = Status.CORRECT
        else:
            origin = self.rank if verdict.origin is None else verdict.origin
            message.update(status=verdict.status, reason=verdict.reason, detail=verdict.detail[-8000:], origin=origin,
                           failure={"call": None, "calls": None, "mismatch": None, **self.where, **verdict.failure},
                           gone=verdict.gone)
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
        self.progress(Stage.DONE)
        self.report(None, shapes)

    def sandbox_pids(self) -> dict[str, list[int]] | None:
        """Each side's processes, as its freezer counts them (its sandbox root's descendants)."""
        roots = {side: self.cfg.get(f"{side}_root") for side in SIDES}
        if not all(roots.values()):
            return None
        return {side: descendants(root) for side, root in roots.items()}

    def ask_driver(self, decide: Callable[..., Any], *more: Any) -> Any:
        """`decide` (one of gpu_memory's) on the GPU memory the driver shows each process holding
        and each side's processes, then `more`; None where the sandboxes are not known."""
        pids = self.sandbox_pids()
        if pids is None:
            return None
        return decide(gpu_memory.held_by_pid(), pids[Side.SOLUTION], pids[Side.REFERENCE], *more)

    def out_of_memory_cause(self) -> str | None:
        """The solution's share of the GPU's memory as the reason the judge ran out of it, where
        the driver shows its processes holding more than the reference's (gpu_memory)."""
        return self.ask_driver(gpu_memory.solutions_share)

    def reference_out_of_memory_verdict(self, exc: ReferenceOutOfMemory) -> Verdict:
        """The solution's runtime error when the reference ran out of GPU memory beside it; HostError
        where the driver shows the solution holding no more than the reference (gpu_memory)."""
        blame, why = self.ask_driver(gpu_memory.reference_shortage) or (gpu_memory.Blame.UNKNOWN, "")
        if blame == gpu_memory.Blame.HOST:
            raise HostError(f"{why}: {exc.reason}")
        # Where the driver shows none of the reference's processes, the solution's as well: the
        # reference alone ran these shapes in its selfcheck, so a shortage beside a solution is
        # most likely the solution's doing.
        reason = f"{why}; the reference raised {exc.reason}" if why else f"the reference raised {exc.reason}"
        return Verdict(Status.RUNTIME_ERROR, reason, exc.detail)

    def close(self) -> None:
        if self.freezer is not None:
            self.freezer.close()
        for link in self.links.values():
            try:
                transport.send(link.sock, {"op": "exit"})
            except OSError:
                pass


def host_failed(channel: Channel, rank: int | None, reason: str) -> int:
    """Reports a failure that is not the solution's (retried as the host's); the judge's exit code."""
    channel.send({"type": "infra", "rank": rank, "reason": reason})
    return 3


def judge_failed(channel: Channel, rank: int | None, exc: BaseException) -> int:
    """The judge itself broke: the evaluator's fault, reported as the host's."""
    return host_failed(channel, rank, f"the judge failed: {type(exc).__name__}: {exc}\n{traceback.format_exc()[-4000:]}")


def main(argv: list[str]) -> int:
    channel = Channel(int(argv[0]), int(argv[1]))
    rank = channel.config.get("rank")
    judge = None
    try:
        judge = Judge(channel, [int(fd) for fd in argv[2:4]])
        if channel.config.get("selfcheck"):
            from evaluator.selfcheck import run_rank

            run_rank(judge)
        else:
            judge.run()
    except Verdict as verdict:
        judge.report(verdict)
    except (torch.OutOfMemoryError, torch.AcceleratorError) as exc:  # the judge's own allocation or launch
        if not gpu_memory.reads_as_out_of_memory(f"{type(exc).__name__}: {exc}"):
            return judge_failed(channel, rank, exc)
        # Whose memory filled the GPU?
        reason = judge.out_of_memory_cause() if judge is not None else None
        if reason is None:
            return host_failed(channel, rank, f"the judge ran out of GPU memory: {exc}")
        judge.report(Verdict(Status.RUNTIME_ERROR, reason, str(exc)[-2000:]))
    except ReferenceOutOfMemory as exc:  # a link's request outside Judge.guarded
        try:
            judge.report(judge.reference_out_of_memory_verdict(exc))
        except HostError as host:
            return host_failed(channel, rank, str(host))
    except HostError as exc:
        return host_failed(channel, rank, str(exc))
    except Exception as exc:  # noqa: BLE001 - the judge itself broke: the evaluator's fault
        return judge_failed(channel, rank, exc)
    finally:
        if judge is not None:
            judge.close()
        sys.stdout.flush()
        sys.stderr.flush()
    os._exit(0)
