"""From the ranks' raw reports to the result document (evaluator/results.py). Every statistic is
computed here, in the parent, out of the solution's reach."""

from __future__ import annotations

import math
import re
import subprocess
from dataclasses import fields
from datetime import datetime, timezone

from evaluator import results, timing_stats
from evaluator.results import (
    SIDES,
    AllocatorActivity,
    BatchOrder,
    Digests,
    Failure,
    Mismatch,
    Mode,
    Result,
    Settings,
    ShapeResult,
    Side,
    StageTime,
    Status,
    TimingRun,
)
from evaluator.roofline import profile, profiles, roofline
from evaluator.timing_stats import TimingStop

GPU_PROFILES = {"H200": "h200", "H100": "h100", "B200": "b200"}


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, timezone.utc).isoformat(timespec="seconds")


def detect_profile(gpu_name: str | None) -> str | None:
    for marker, key in GPU_PROFILES.items():
        if gpu_name and marker in gpu_name:
            return key
    return None


def driver_version() -> str | None:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else None


def _log_tail(ranks) -> str:
    per_rank = results.LOG_TAIL_CHARS // max(1, len(ranks))
    parts = []
    for r in ranks:
        text = r.log_text
        if text.strip():
            parts.append(f"== rank {r.rank} ==\n{results.tail(text, per_rank)}")
    return "\n".join(parts)


def _failure(rank: int | None, where: dict | None, shape_names: list[str], last_stage: str = "") -> Failure:
    """Where it failed, from the failing rank's report (`where`), else from its last stage."""
    where = where if isinstance(where, dict) else {}
    mismatch = where.get("mismatch")
    try:
        mismatch = Mismatch(**mismatch) if isinstance(mismatch, dict) else None
    except TypeError:
        mismatch = None
    shape = where.get("shape")
    return Failure(rank=rank, shape=shape if shape in shape_names else None,
                   step=str(where.get("step") or last_stage or "start"), call=where.get("call"),
                   calls=where.get("calls"), mismatch=mismatch)


def _status(ranks, outcome, shape_names: list[str] = ()) -> tuple[Status, str, int | None, str, Failure | None]:
    """(status, reason, failing rank, detail, where it failed) from every rank's report and exit."""
    from evaluator.launch import exit_description

    if outcome["tampered"]:
        return Status.REJECTED, outcome["tampered"], None, "", None
    # A rank that died without reporting comes first: its peers' errors are consequences.
    crashed = [r for r in ranks if r.final is None and r.exit_code is not None]
    if crashed:
        r = crashed[0]
        reason = f"rank {r.rank} {exit_description(r.exit_code)} before reporting (stage: {r.last_stage})"
        return Status.RUNTIME_ERROR, reason, r.rank, "", _failure(r.rank, None, shape_names, r.last_stage)
    finals = [r for r in ranks if r.final]
    failing = [r.final for r in finals if r.final.get("status") != Status.CORRECT]
    if failing:
        # A player that died comes first: its peers' errors (a collective that lost a member) are
        # consequences.
        first = min(failing, key=lambda f: (f.get("gone") is None, f.get("origin", f["rank"]) != f["rank"],
                                            f.get("origin", f["rank"])))
        origin = first.get("origin", first["rank"])
        reason = first.get("reason", "")
        if first.get("gone") is not None:
            code = outcome.get("players", {}).get(Side(first["gone"]), {}).get(origin)
            if code is not None:
                how = exit_description(code)
                reason += f"; it was {how}" if how.startswith("killed") else f"; it {how}"
        where = _failure(origin, first.get("failure"), shape_names)
        return Status(first["status"]), f"rank {origin}: {reason}", origin, first.get("detail", ""), where
    missing = [r for r in ranks if r.final is None]
    if missing:
        stuck = ", ".join(f"rank {r.rank}" for r in missing)
        reason = (
            f"time limit reached; {stuck} did not finish (last stage: {missing[0].last_stage}): "
            "too slow for the limit, or a hang or deadlock"
        )
        return Status.TIMEOUT, reason, missing[0].rank, "", _failure(missing[0].rank, None, shape_names, missing[0].last_stage)
    return Status.CORRECT, "", None, "", None


# Where some batches of the solution took no longer than the protocol's own cost (a tiny shape),
# their ratios are unbounded, and so may be the interval's upper end: the shape then has none.
UNBOUNDED = ("the solution's time was within the protocol's own cost on some batches: its speedup's "
             "interval has no upper bound")
FLUSHED = "diagnostic run: each player wrote {mib:g} MiB before every call to push the inputs out of the L2 cache"
REORDERED = "diagnostic run: timed pairs in the {order} order, not the judge's symmetric one"
RESIZED = "diagnostic run: timed batches sized to last {ms:g} ms, not the judge's own length"


def _allocator(per_rank: list[dict]) -> dict[Side, AllocatorActivity] | None:
    """Each side's allocator counts over the ranks (timed_pairs.allocator_change), for the sides every
    rank counted."""
    counts = {}
    for side in SIDES:
        reports = [r.get(side) for r in per_rank]
        if all(reports):
            counts[side] = AllocatorActivity(**{f.name: [r[f.name] for r in reports] for f in fields(AllocatorActivity)})
    return counts or None


def _shape_entry(shape: dict, ranks, status: Status, spec, req, hw_key: str | None, meaningful: bool) -> ShapeResult:
    reports = []
    for r in ranks:
        rows = [s for s in (r.final or {}).get("shapes", []) if s.get("name") == shape["name"]]
        reports.append(rows[0] if rows else None)
    complete = all(reports)
    notes = {n for s in reports if s for n in s.get("notes", [])}
    if req is not None and req.flush_l2_mib:
        notes.add(FLUSHED.format(mib=req.flush_l2_mib))
    if req is not None and req.batch_order != BatchOrder.SYMMETRIC:
        notes.add(REORDERED.format(order=req.batch_order))
    if req is not None and req.batch_target_ms:
        notes.add(RESIZED.format(ms=req.batch_target_ms))
    solution = reference = speedup = speedup_interval = timing_run = roof = digests = None
    if complete and all(s.get("solution_us") for s in reports):
        batch = reports[0]["batch"]
        calls = batch["calls"]
        across = reports[0]["across_ranks_us"]  # the same in every rank's report
        solution = results.timing([s["solution_us"] for s in reports], calls, across["solution"])
        reference = results.timing([s["reference_us"] for s in reports], calls, across["reference"])
        ratio = timing_stats.paired_ratio(across["reference"], across["solution"])
        if ratio is not None:
            speedup = ratio.value
            if math.isfinite(ratio.high):
                speedup_interval = [ratio.low, ratio.high]
            else:
                notes.add(UNBOUNDED)
        timing_run = TimingRun(calls_per_batch=calls, pairs=batch["batches"], fixed_us=batch["fixed_us"],
                               stop=TimingStop(batch["stop"]), seconds=batch["seconds"],
                               pairs_us=[[round(r, 3), round(s, 3)] for r, s in zip(across["reference"], across["solution"])],
                               allocator=_allocator([s.get("allocator") or {} for s in reports]))
    if complete:
        digests = Digests(solution=[s["digest_solution"] for s in reports],
                          reference=[s["digest_reference"] for s in reports])
    if spec is not None and hw_key in profiles():
        model = roofline(spec.phases(shape["dims"], req.world_size), profile(hw_key))
        roof = model.result(solution.time_us if meaningful and solution else None)
    return ShapeResult(
        name=shape["name"], dims=shape["dims"], default=bool(shape.get("default")),
        correct=True if complete else (False if status == Status.INCORRECT else None),
        max_abs_error=max((s["max_abs_error"] for s in reports if s), default=None),
        solution=solution, reference=reference, speedup=speedup, roofline=roof, digests=digests,
        notes=sorted(notes),
        speedup_interval=speedup_interval, timing_run=timing_run,
    )


def document(*, req, spec, shapes, ranks, outcome, started_at: float, wall_s: float) -> dict:
    """The result document, as JSON, checked the way the platform will check it."""
    status, reason, failing_rank, detail, failure = _status(ranks, outcome, [s["name"] for s in shapes])
    environment = dict((ranks[0].final or {}).get("environment") or {})
    mode = Mode(req.mode)
    if mode != Mode.CPU:
        environment["driver"] = driver_version()
    environment["sandboxed"] = req.sandboxed
    hw_key = req.hardware or detect_profile(environment.get("gpu_name"))
    shape_entries = [_shape_entry(s, ranks, status, spec, req, hw_key, mode.timings_meaningful) for s in shapes]
    stages = {StageTime.STARTUP: outcome["startup_s"]}  # spawn to ready; includes "init"
    stages.update((ranks[0].final or {}).get("stages", {}))
    stages[StageTime.TOTAL] = wall_s
    log = _log_tail(ranks)
    if detail:
        log = f"{detail.rstrip()}\n{log}" if not log else f"{log}\n== failure ==\n{detail.rstrip()}"
    result = Result(
        status=status,
        reason=re.sub(r"\s+", " ", reason).strip()[:2000],
        failing_rank=failing_rank,
        problem=spec.id if spec else str(req.problem),
        mode=mode,
        world_size=req.world_size,
        hardware=hw_key,
        timings_meaningful=mode.timings_meaningful,
        settings=Settings(warmup=req.warmup, iters=req.iters, trials=req.trials, timeout_s=req.timeout_s,
                          timing_budget_s=req.timing_budget_s),
        shapes=shape_entries,
        summary=results.summarize(shape_entries, status),
        stages=stages,
        environment=environment,
        log_tail=results.tail(log),
        started_at=_iso(started_at),
        finished_at=_iso(started_at + wall_s),
        failure=failure,
    )
    # The ranks' reports fill parts of it as plain JSON (stages, environment): read it back whole.
    doc = result.to_dict()
    Result.from_dict(doc)
    return doc
