"""The evaluation result document: the one schema the evaluator, the database, the API and the
pages share. Pure Python (no torch, no Django).

Shape of a document (schema "pkb.result/1"):

    {
      "schema": "pkb.result/1",
      "status": "correct" | "incorrect" | "compile_error" | "runtime_error" | "timeout" | "rejected",
      "reason": str,                       # one line a person can read
      "failing_rank": int | None,
      "problem": str, "mode": "cpu" | "shared-gpu" | "gpu", "world_size": int, "hardware": str | None,
      "timings_meaningful": bool,          # False in cpu and shared-gpu modes
      "settings": {"warmup": int, "iters": int, "trials": int, "timeout_s": float},
      "shapes": [{
          "name": str, "dims": {str: int}, "default": bool, "correct": bool | None,
          "max_abs_error": float | None,
          "solution": Timing | None, "reference": Timing | None,   # slowest rank decides
          "speedup": float | None,                                 # reference / solution
          "roofline": {"t_roof_us", "bound", "phases": [...], "utilization"} | None,
          "digests": {"solution": [sha256 per rank], "reference": [sha256 per rank]} | None,
          "notes": [str],
      }],
      "summary": {"correct": bool, "speedup": float | None, "utilization": float | None,
                  "solution_us": float | None, "reference_us": float | None},
      "stages": {stage: seconds},          # wall time per stage, for the evaluator's own benchmark
      "environment": {...}, "log_tail": str, "started_at": iso, "finished_at": iso,
    }

Timing = {"time_us": median over batches of the slowest rank's time per call, "per_rank": [Stats],
          "slowest_rank": int (the rank with the largest median)},
Stats = {"mean_us", "median_us", "std_us", "min_us", "max_us" over the rank's batches (each the
         judge-clocked batch time per call, less the protocol's fixed cost), "iterations": calls
         timed, "batches": batches timed}.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping
from typing import Any

from evaluator import RESULT_SCHEMA

STATUSES = ("correct", "incorrect", "compile_error", "runtime_error", "timeout", "rejected")
FAILURE_KINDS = ("compile_error", "runtime_error", "incorrect", "timeout", "rejected")
MODES = ("cpu", "shared-gpu", "gpu")
# The two players of every rank, in the order a judge receives their sockets. Untimed pairs run the
# reference first: its outputs size the slots.
SIDES = ("reference", "solution")
LOG_TAIL_CHARS = 16_000


def stats(samples_us: Iterable[float], calls_per_sample: int = 1) -> dict[str, float]:
    values = [float(v) for v in samples_us]
    if not values:
        raise ValueError("no timing samples")
    return {
        "mean_us": statistics.fmean(values),
        "median_us": statistics.median(values),
        "std_us": statistics.pstdev(values) if len(values) > 1 else 0.0,
        "min_us": min(values),
        "max_us": max(values),
        "iterations": len(values) * calls_per_sample,
        "batches": len(values),
    }


def timing(per_rank_samples_us: list[list[float]], calls_per_batch: int = 1) -> dict[str, Any]:
    """Per-rank statistics. Sample i of every rank is the same batch, timed by each rank's judge:
    the problem's time is the median over batches of the slowest rank's, a median because a
    stall of the host on one batch must not move it (and no batch is ever measured again)."""
    per_rank = [stats(s, calls_per_batch) for s in per_rank_samples_us]
    slowest = max(range(len(per_rank)), key=lambda r: per_rank[r]["median_us"])
    per_batch = [max(batch) for batch in zip(*per_rank_samples_us)]
    return {"time_us": statistics.median(per_batch), "per_rank": per_rank, "slowest_rank": slowest}


def geomean(values: Iterable[float | None]) -> float | None:
    vals = [v for v in values if v is not None and v > 0 and math.isfinite(v)]
    if not vals:
        return None
    return math.exp(sum(math.log(v) for v in vals) / len(vals))


def summarize(shapes: list[Mapping[str, Any]], status: str) -> dict[str, Any]:
    """Headline numbers: geometric means over shapes (as GPU MODE ranks), plus the default shape's times."""
    default = next((s for s in shapes if s.get("default")), shapes[0] if shapes else None)
    correct = status == "correct"

    def t(s, side):
        return (s.get(side) or {}).get("time_us") if s else None

    return {
        "correct": correct,
        "speedup": geomean(s.get("speedup") for s in shapes) if correct else None,
        "utilization": geomean((s.get("roofline") or {}).get("utilization") for s in shapes) if correct else None,
        "solution_us": t(default, "solution") if correct else None,
        "reference_us": t(default, "reference"),
    }


def tail(text: str, limit: int = LOG_TAIL_CHARS) -> str:
    if len(text) <= limit:
        return text
    return f"[... {len(text) - limit} characters cut ...]\n" + text[-limit:]


class InvalidResult(ValueError):
    pass


def _require(cond: bool, message: str) -> None:
    if not cond:
        raise InvalidResult(message)


def _number_or_none(value: Any, name: str) -> None:
    _require(value is None or (isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)),
             f"{name} must be a finite number or null")


def validate(doc: Any) -> dict[str, Any]:
    """Check a document received from a worker before it is stored. Returns it unchanged."""
    _require(isinstance(doc, dict), "result must be an object")
    _require(doc.get("schema") == RESULT_SCHEMA, f"unknown schema {doc.get('schema')!r}")
    _require(doc.get("status") in STATUSES, f"unknown status {doc.get('status')!r}")
    _require(isinstance(doc.get("reason", ""), str), "reason must be a string")
    _require(doc.get("mode") in MODES, f"unknown mode {doc.get('mode')!r}")
    _require(isinstance(doc.get("world_size"), int) and doc["world_size"] >= 1, "world_size must be a positive int")
    _require(isinstance(doc.get("shapes"), list), "shapes must be a list")
    for shape in doc["shapes"]:
        _require(isinstance(shape, dict) and isinstance(shape.get("name"), str), "each shape needs a name")
        _number_or_none(shape.get("speedup"), "speedup")
        for side in ("solution", "reference"):
            t = shape.get(side)
            _require(t is None or isinstance(t, dict), f"{side} timing must be an object")
            if t:
                _number_or_none(t.get("time_us"), f"{side}.time_us")
    summary = doc.get("summary")
    _require(isinstance(summary, dict), "summary must be an object")
    for key in ("speedup", "utilization", "solution_us", "reference_us"):
        _number_or_none(summary.get(key), f"summary.{key}")
    _require(summary.get("correct") == (doc["status"] == "correct"), "summary.correct disagrees with status")
    return doc
