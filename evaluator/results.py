"""The evaluation result document: the one typed model the evaluator, the GPU worker, the database,
the API and the pages share, with its vocabulary (statuses, modes, sides, stages, failure kinds).
Standard library only: no torch, no Django, no pydantic (GPU worker hosts have none of them).

A document travels and is stored as JSON: `Result.to_dict()` writes it, `Result.from_dict()` reads
it back and refuses anything malformed (`InvalidResult`). The dataclasses' fields, in order, are
the JSON object's keys; `SCHEMA` names the shape and changes whenever it does.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
import types
import typing
from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum, StrEnum
from functools import cache
from typing import Any, TypedDict

from evaluator.timing_stats import TimingStop, median_interval, slowest_per_batch

SCHEMA = "pkb.result/5"
# Older shapes still read: /1 lacked the timing intervals, /2 the failure's whereabouts, /3 the
# timed pairs' samples, /4 the allocators' record (fields that default to None here).
READABLE_SCHEMAS = ("pkb.result/1", "pkb.result/2", "pkb.result/3", "pkb.result/4", SCHEMA)
LOG_TAIL_CHARS = 16_000


class Status(StrEnum):
    """How the solution fared. Only the solution's doing: a broken host is no status."""

    CORRECT = "correct"
    INCORRECT = "incorrect"
    COMPILE_ERROR = "compile_error"
    RUNTIME_ERROR = "runtime_error"
    TIMEOUT = "timeout"
    REJECTED = "rejected"


class FailureKind(StrEnum):
    """Every status but correct, in the order comparisons count them."""

    COMPILE_ERROR = Status.COMPILE_ERROR.value
    RUNTIME_ERROR = Status.RUNTIME_ERROR.value
    INCORRECT = Status.INCORRECT.value
    TIMEOUT = Status.TIMEOUT.value
    REJECTED = Status.REJECTED.value


class Mode(StrEnum):
    GPU = "gpu"  # one process per GPU, NCCL
    SHARED_GPU = "shared-gpu"  # N processes on one GPU, gloo: correctness only
    CPU = "cpu"  # N processes on the CPU, gloo

    @property
    def timings_meaningful(self) -> bool:
        return self is Mode.GPU


class Side(StrEnum):
    """The two players of every rank."""

    REFERENCE = "reference"
    SOLUTION = "solution"


# The order a judge receives the players' sockets. Untimed pairs run the reference first: its
# outputs size the slots.
SIDES = (Side.REFERENCE, Side.SOLUTION)


class BatchOrder(StrEnum):
    """The order of a shape's timed pairs (evaluator/timed_pairs.py, pair_schedule)."""

    SYMMETRIC = "symmetric"  # the judge's: each side follows its own player in half its batches
    REFERENCE_WARM = "reference-warm"  # the earlier order, kept as a diagnostic: it favoured the reference


class Stage(StrEnum):
    """Where an evaluation is, in order: waiting in the platform's queue, then what the evaluator
    reports as it goes."""

    QUEUED = "queued"
    STARTING = "starting"
    BUILDING = "building"
    CHECKING = "checking"
    TIMING = "timing"
    DONE = "done"


class StageTime(StrEnum):
    """The keys of a document's `stages`: wall seconds per step, for the evaluator's own benchmark."""

    STARTUP = "startup"  # spawn to the first progress report; includes init
    INIT = "init"
    BUILD = "build"
    CORRECTNESS = "correctness"
    WARMUP = "warmup"
    TIMING = "timing"
    HOLD = "hold"  # within timing: stopping and resuming the solution's processes, its GPU work drained
    DIGEST = "digest"
    TOTAL = "total"


class Resource(StrEnum):
    """What bounds a roofline phase."""

    COMPUTE = "compute"
    HBM = "hbm"
    NVLINK = "nvlink"


class InvalidResult(ValueError):
    pass


def _require(cond: bool, message: str) -> None:
    if not cond:
        raise InvalidResult(message)


@dataclass(frozen=True)
class RankStats:
    """One rank's batches of one side: each batch is the judge-clocked time per call, less the
    protocol's fixed cost."""

    mean_us: float
    median_us: float
    std_us: float
    min_us: float
    max_us: float
    iterations: int  # calls timed
    batches: int

    def __post_init__(self) -> None:
        _require(self.batches >= 1 and self.iterations >= self.batches, "needs at least one call per batch")
        _require(min(self.mean_us, self.median_us, self.std_us, self.min_us) >= 0, "times must not be negative")


@dataclass(frozen=True)
class Timing:
    time_us: float  # median over batches of the slowest rank's time per call
    per_rank: list[RankStats]
    slowest_rank: int  # the rank with the largest median
    interval_us: list[float] | None = None  # [low, high]: 95% interval of time_us (evaluator/timing_stats.py)

    def __post_init__(self) -> None:
        _require(0 <= self.slowest_rank < len(self.per_rank), "slowest_rank is not one of per_rank")
        _require(self.interval_us is None or (len(self.interval_us) == 2 and self.interval_us[0] <= self.interval_us[1]),
                 "interval_us must be [low, high]")


@dataclass(frozen=True)
class AllocatorActivity:
    """What one side's CUDA caching allocator did during a shape's timed pairs, per rank, as that
    side's player counts it: calls that took memory from the device (cudaMalloc or a mapping) and
    gave it back (cudaFree, which waits for the GPU), and allocations that failed, emptied the
    cache and tried again. Each can cost milliseconds inside the clock, so a side that makes them
    and one that does not time apart though their code is the same. The reference's player runs
    only the judge's code and the reference, so its counts are its own; the solution's player
    could report anything: a diagnostic, never part of the speedup."""

    device_allocs: list[int]
    device_frees: list[int]
    retries: list[int]

    def __post_init__(self) -> None:
        counts = (self.device_allocs, self.device_frees, self.retries)
        _require(len({len(c) for c in counts}) == 1, "allocator counts need one value per rank each")
        _require(all(n >= 0 for c in counts for n in c), "allocator counts must not be negative")


@dataclass(frozen=True)
class TimingRun:
    """How a shape was timed: pairs of batches (one batch per side on the same fresh inputs),
    each batch `calls_per_batch` calls, less the protocol's fixed cost per batch, until `stop`."""

    calls_per_batch: int
    pairs: int
    fixed_us: float  # the protocol's cost per batch (the median null batch), subtracted from every batch
    stop: TimingStop
    seconds: float  # wall time the timed pairs took
    # Each timed pair's time per call, across ranks and less the fixed cost: [reference, solution],
    # in the order timed. Pair i ran the reference first when i is even (the sides alternate).
    pairs_us: list[list[float]] | None = None
    # Each side's allocator during the timed pairs, where its player is on a GPU and every rank's
    # report was counts (AllocatorActivity).
    allocator: dict[Side, AllocatorActivity] | None = None

    def __post_init__(self) -> None:
        _require(self.pairs_us is None or (len(self.pairs_us) == self.pairs and all(len(p) == 2 for p in self.pairs_us)),
                 "pairs_us must hold [reference, solution] for each of the pairs")


@dataclass(frozen=True)
class Phase:
    name: str
    compute_us: float
    hbm_us: float
    nvlink_us: float
    time_us: float
    bound: Resource


@dataclass(frozen=True)
class Roofline:
    t_roof_us: float
    bound: Resource  # the resource that contributes most of T_roof
    phases: list[Phase]
    utilization: float | None  # T_roof over the solution's time, where timings are meaningful


@dataclass(frozen=True)
class Digests:
    """SHA-256 of each rank's outputs on the public trial, whose inputs are the same on any host."""

    solution: list[str]
    reference: list[str]


@dataclass(frozen=True)
class ShapeResult:
    name: str
    dims: dict[str, int]
    default: bool
    correct: bool | None  # None: not every rank got that far
    max_abs_error: float | None
    solution: Timing | None
    reference: Timing | None
    speedup: float | None  # reference / solution
    roofline: Roofline | None
    digests: Digests | None
    notes: list[str]
    speedup_interval: list[float] | None = None  # [low, high]: 95% interval of speedup
    timing_run: TimingRun | None = None


@dataclass(frozen=True)
class Summary:
    """Headline numbers: geometric means over shapes, the default shape's times."""

    correct: bool
    speedup: float | None
    utilization: float | None
    solution_us: float | None
    reference_us: float | None
    # [low, high]: the geometric means of the shapes' 95% interval ends. If every shape's interval
    # holds its true speedup, this holds their geometric mean (the mean is monotone in each); None
    # unless every shape has an interval.
    speedup_interval: list[float] | None = None


@dataclass(frozen=True)
class Settings:
    warmup: int
    iters: int  # the fewest timed calls per side; more while the speedup's interval is wide
    trials: int
    timeout_s: float
    timing_budget_s: float | None = None  # per shape, for the calls beyond `iters` (0: none)


@dataclass(frozen=True)
class Mismatch:
    """The element of a wrong output that the judge singled out: the one furthest out of tolerance
    (the first that differs, where the check is bitwise; the first non-finite one, where the
    reference is finite there)."""

    output: str  # which output: "output", "output 1", "output['logits']", "in-place input 0"
    index: list[int]  # the element's position, one index per dimension
    flat_index: int
    got: str  # the values as the judge printed them (NaN and the infinities are no JSON numbers)
    expected: str
    max_abs_error: float | None  # over the whole output, where finite
    allowed: str | None  # the tolerance, described ("atol=0.1, rtol=0.02"); None for bitwise checks
    wrong: int | None  # elements out of tolerance (bitwise: elements whose bits differ)
    elements: int  # elements in the output


@dataclass(frozen=True)
class Failure:
    """Where a failed evaluation went wrong, as the rank that found it saw it. Shapes run in order
    and each runs its correctness trials first, so this is the first failing trial."""

    rank: int | None
    shape: str | None  # None before the first shape (loading, building) or when unknown
    step: str  # "build", "trial 2 of 3", "warm-up", "timing", "public trial", or the last stage reported
    call: int | None  # which call of a batch of several (1-based), where it was one of a batch
    calls: int | None
    mismatch: Mismatch | None  # for wrong outputs


class _Sandboxing(TypedDict):
    sandboxed: bool  # False only for someone judging their own file on the command line


class Environment(_Sandboxing, total=False):
    """The host as the run saw it. A key is there only where it applies: rank 0's report is
    missing when rank 0 died first, the GPU's facts on hosts without CUDA, the driver in cpu mode;
    a fact that applies but could not be read is null. Hence a TypedDict, not a dataclass."""

    python: str
    torch: str
    cuda: str | None
    mode: Mode
    world_size: int
    hostname: str
    triton: str | None
    gpu_name: str
    gpu_count: int
    nccl: str
    driver: str | None
    # Where rank 0's players of both sides started: at "fixed" addresses (the judge's default),
    # "random" ones (the kernel's randomisation) or "mixed"; null where a player could not tell
    # (launch.LAYOUT_ENV).
    player_layout: str | None


@dataclass(frozen=True)
class Result:
    status: Status
    reason: str  # one line a person can read; empty when correct
    failing_rank: int | None
    problem: str
    mode: Mode
    world_size: int
    hardware: str | None  # roofline profile key
    timings_meaningful: bool
    settings: Settings
    shapes: list[ShapeResult]
    summary: Summary
    stages: dict[StageTime, float | None]
    environment: Environment
    log_tail: str
    started_at: str  # ISO 8601
    finished_at: str
    failure: Failure | None = None  # where it failed, for a failed evaluation (schema 3 on)

    def __post_init__(self) -> None:
        correct = self.status == Status.CORRECT
        _require(self.world_size >= 1, "world_size must be at least 1")
        _require(self.timings_meaningful == Mode(self.mode).timings_meaningful,
                 f"timings_meaningful disagrees with mode {str(self.mode)!r}")
        _require(self.failing_rank is None or (not correct and 0 <= self.failing_rank < self.world_size),
                 "failing_rank must be a rank of a failed evaluation, or null")
        s = self.summary
        _require(s.correct == correct, f"summary.correct disagrees with status {str(self.status)!r}")
        _require(correct or (s.speedup is None and s.utilization is None and s.solution_us is None),
                 "summary of a failed evaluation has a speedup, utilization or solution time")
        names = [shape.name for shape in self.shapes]
        _require(len(set(names)) == len(names), "shape names repeat")
        _require(self.failure is None or not correct, "a correct evaluation has no failure")
        _require(self.failure is None or self.failure.shape is None or self.failure.shape in names,
                 "failure.shape is not one of the shapes")
        _require(sum(shape.default for shape in self.shapes) <= 1, "more than one default shape")
        for shape in self.shapes:
            ranked = [t.per_rank for t in (shape.solution, shape.reference) if t]
            ranked += [shape.digests.solution, shape.digests.reference] if shape.digests else []
            _require(all(len(r) == self.world_size for r in ranked),
                     f"shape {shape.name!r}: per-rank lists must have world_size ({self.world_size}) entries")

    @property
    def default_shape(self) -> ShapeResult | None:
        return default_shape(self.shapes)

    def to_dict(self) -> dict[str, Any]:
        return {"schema": SCHEMA, **_plain(self)}

    @classmethod
    def from_dict(cls, doc: Any) -> Result:
        """The document received from a worker (or read back), checked field by field."""
        _require(isinstance(doc, dict), f"a result must be an object, not {_kind(doc)}")
        _require(doc.get("schema") in READABLE_SCHEMAS,
                 f"unknown schema {doc.get('schema')!r}, expected one of {', '.join(map(repr, READABLE_SCHEMAS))}")
        return _parse(cls, {k: v for k, v in doc.items() if k != "schema"}, "")


# -- JSON <-> the dataclasses above ----------------------------------------------------------------


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, dict):
        return {_plain(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


_JSON_NAMES = {type(None): "null", bool: "a boolean", int: "an integer", float: "a number", str: "a string",
               list: "a list", dict: "an object"}


def _kind(value: Any) -> str:
    return _JSON_NAMES.get(type(value), type(value).__name__)


def _at(path: str, key: Any) -> str:
    return f"{path}.{key}" if path else str(key)


@cache
def _fields(cls: type) -> tuple[dict[str, Any], frozenset[str]]:
    """(type of each key, the keys that must be there) of a dataclass or TypedDict."""
    hints = typing.get_type_hints(cls)
    if not dataclasses.is_dataclass(cls):
        return hints, cls.__required_keys__
    # A field with a default came in a later schema: documents of an earlier one lack it.
    defaulted = {f.name for f in dataclasses.fields(cls) if f.default is not dataclasses.MISSING}
    return hints, frozenset(hints) - defaulted


def _parse(tp: Any, value: Any, path: str) -> Any:
    """`value` (JSON) as type `tp`; InvalidResult naming `path` where it is not one."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (types.UnionType, typing.Union):  # only ever X | None
        (inner,) = [a for a in args if a is not type(None)]
        return None if value is None else _parse(inner, value, path)
    if origin is list:
        _require(isinstance(value, list), f"{path} must be a list, not {_kind(value)}")
        return [_parse(args[0], v, f"{path}[{i}]") for i, v in enumerate(value)]
    if origin is dict:
        _require(isinstance(value, dict), f"{path} must be an object, not {_kind(value)}")
        return {_parse(args[0], k, f"a key of {path}"): _parse(args[1], v, _at(path, k)) for k, v in value.items()}
    if isinstance(tp, type) and issubclass(tp, Enum):
        allowed = ", ".join(repr(m.value) for m in tp)
        _require(isinstance(value, str) and value in {m.value for m in tp}, f"{path}: {value!r} is not one of {allowed}")
        return tp(value)
    if tp in (bool, int, str):  # exactly: JSON's true is no integer here
        _require(type(value) is tp, f"{path} must be {_JSON_NAMES[tp]}, not {_kind(value)}")
        return value
    if tp is float:  # an integer is a number too; NaN and the infinities are not JSON
        _require(type(value) in (int, float), f"{path} must be a number, not {_kind(value)}")
        _require(math.isfinite(value), f"{path} must be finite, not {value}")
        return value
    return _parse_object(tp, value, path)


def _parse_object(cls: type, value: Any, path: str) -> Any:
    where = path or "the result"
    _require(isinstance(value, dict), f"{where} must be an object, not {_kind(value)}")
    hints, required = _fields(cls)
    missing = [k for k in hints if k in required and k not in value]
    _require(not missing, f"{where} lacks {', '.join(missing)}")
    unknown = [k for k in value if k not in hints]
    _require(not unknown, f"{where} has unknown fields {', '.join(map(repr, unknown))}")
    fields = {k: _parse(hints[k], v, _at(path, k)) for k, v in value.items()}
    if not dataclasses.is_dataclass(cls):
        return fields
    try:
        return cls(**fields)
    except InvalidResult as exc:  # its own checks (__post_init__), which know no path
        raise InvalidResult(f"{path}: {exc}" if path else str(exc)) from None


# -- statistics and summaries ---------------------------------------------------------------------


def stats(samples_us: Iterable[float], calls_per_sample: int = 1) -> RankStats:
    values = [float(v) for v in samples_us]
    if not values:
        raise ValueError("no timing samples")
    return RankStats(
        mean_us=statistics.fmean(values),
        median_us=statistics.median(values),
        std_us=statistics.pstdev(values) if len(values) > 1 else 0.0,
        min_us=min(values),
        max_us=max(values),
        iterations=len(values) * calls_per_sample,
        batches=len(values),
    )


def timing(per_rank_samples_us: list[list[float]], calls_per_batch: int = 1,
           problem_samples_us: list[float] | None = None) -> Timing:
    """Per-rank statistics, and the problem's time: the median over batches of
    `problem_samples_us`, the judges' time of each batch across ranks (evaluator/judge.py,
    across_ranks), or where none is given the slowest rank's. Sample i of every list is the same
    batch. A median, because a stall of the host on one batch must not move it (and no batch is
    ever measured again)."""
    per_rank = [stats(s, calls_per_batch) for s in per_rank_samples_us]
    slowest = max(range(len(per_rank)), key=lambda r: per_rank[r].median_us)
    per_batch = slowest_per_batch(per_rank_samples_us) if problem_samples_us is None else list(problem_samples_us)
    low, high, _coverage = median_interval(per_batch)
    return Timing(time_us=statistics.median(per_batch), per_rank=per_rank, slowest_rank=slowest,
                  interval_us=[low, high])


def geomean(values: Iterable[float | None]) -> float | None:
    vals = [v for v in values if v is not None and v > 0 and math.isfinite(v)]
    if not vals:
        return None
    return math.exp(sum(math.log(v) for v in vals) / len(vals))


def default_shape(shapes: list[ShapeResult]) -> ShapeResult | None:
    """The shape marked default, else the first."""
    return next((s for s in shapes if s.default), shapes[0] if shapes else None)


def summarize(shapes: list[ShapeResult], status: Status) -> Summary:
    """Headline numbers: geometric means over shapes (as GPU MODE ranks), plus the default shape's times."""
    default = default_shape(shapes)
    correct = status == Status.CORRECT

    def t(side: Timing | None) -> float | None:
        return side.time_us if side else None

    intervals = [s.speedup_interval for s in shapes]
    interval = None
    if correct and shapes and all(i and i[0] > 0 and i[1] >= i[0] for i in intervals):
        interval = [geomean(i[0] for i in intervals), geomean(i[1] for i in intervals)]
    return Summary(
        correct=correct,
        speedup=geomean(s.speedup for s in shapes) if correct else None,
        speedup_interval=interval,
        utilization=geomean(s.roofline.utilization for s in shapes if s.roofline) if correct else None,
        solution_us=t(default.solution) if correct and default else None,
        reference_us=t(default.reference) if default else None,
    )


def allocator_note(allocator: dict | None) -> str | None:
    """A sentence on a shape's `timing_run.allocator` (its JSON form), summed over ranks, where
    either side's allocator went to the device during the timed calls; None where neither did.
    The pages, the CLI and the benchmarks say it alike."""
    counts = {side: {k: sum(v) for k, v in allocator[side].items()}
              for side in (Side.SOLUTION, Side.REFERENCE) if (allocator or {}).get(side)}
    if not any(n for side in counts.values() for n in side.values()):
        return None
    parts = [f"the {side}'s CUDA allocator took memory from the device {c['device_allocs']} times, gave it back "
             f"{c['device_frees']} times and retried {c['retries']} times" for side, c in counts.items()]
    note = "During the timed calls, " + "; ".join(parts) + " (each such call can cost milliseconds inside the clock)."
    if counts.get(Side.REFERENCE, {}).get("retries"):
        note += (" The reference ran short of GPU memory while it was timed, which slows it and makes the speedup"
                 " read high.")
    return note


def tail(text: str, limit: int = LOG_TAIL_CHARS) -> str:
    if len(text) <= limit:
        return text
    return f"[... {len(text) - limit} characters cut ...]\n" + text[-limit:]
