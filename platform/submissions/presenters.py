"""What the submission page shows of an evaluation: progress, the per-shape table, per-rank
statistics and chart configurations, all read from the stored result document."""

from __future__ import annotations

from evaluator.results import Stage, Status
from pkb_site import charts
from submissions.models import Evaluation, Problem

PROGRESS = (Stage.QUEUED, Stage.BUILDING, Stage.CHECKING, Stage.TIMING, Stage.DONE)
STATUS_TEXT = {
    Status.CORRECT: "Correct",
    Status.INCORRECT: "Wrong answer",
    Status.COMPILE_ERROR: "Did not compile",
    Status.RUNTIME_ERROR: "Crashed while running",
    Status.TIMEOUT: "Ran out of time",
    Status.REJECTED: "Rejected by the checker",
}


def progress(ev: Evaluation) -> list[dict]:
    """Steps for the progress bar; "starting" shows as part of building."""
    stage = Stage.BUILDING if ev.stage == Stage.STARTING else ev.stage
    here = PROGRESS.index(stage) if stage in PROGRESS else 0
    if ev.finished:
        here = len(PROGRESS) - 1
    return [
        {"name": s.value, "done": i < here or ev.finished, "current": i == here and not ev.finished}
        for i, s in enumerate(PROGRESS)
    ]


def _time(side: dict | None) -> float | None:
    return (side or {}).get("time_us")


def shape_rows(doc: dict, problem: Problem) -> list[dict]:
    dims = {s["name"]: s["dims"] for s in problem.shapes}
    rows = []
    for shape in doc.get("shapes") or []:
        roof = shape.get("roofline") or {}
        rows.append(
            {
                "name": shape["name"],
                "dims": ", ".join(f"{k}={v}" for k, v in (shape.get("dims") or dims.get(shape["name"], {})).items()),
                "correct": shape.get("correct"),
                "max_abs_error": shape.get("max_abs_error"),
                "solution_us": _time(shape.get("solution")),
                "reference_us": _time(shape.get("reference")),
                "speedup": shape.get("speedup"),
                "t_roof_us": roof.get("t_roof_us"),
                "utilization": roof.get("utilization"),
                "bound": roof.get("bound"),
                "notes": shape.get("notes") or [],
                "per_rank": _per_rank(shape),
            }
        )
    return rows


def _per_rank(shape: dict) -> list[dict]:
    sol = (shape.get("solution") or {}).get("per_rank") or []
    ref = (shape.get("reference") or {}).get("per_rank") or []
    slowest = (shape.get("solution") or {}).get("slowest_rank")
    return [
        {
            "rank": r,
            "solution": sol[r] if r < len(sol) else None,
            "reference": ref[r] if r < len(ref) else None,
            "slowest": r == slowest,
        }
        for r in range(max(len(sol), len(ref)))
    ]


def speedup_chart(rows: list[dict]) -> dict | None:
    if not any(r["speedup"] for r in rows):
        return None
    return charts.line(
        [f"{r['name']} ({r['dims']})" for r in rows],
        {"speedup": [r["speedup"] for r in rows]},
        "shape",
        "speedup over the reference (x)",
    )


def roofline_chart(rows: list[dict]) -> dict | None:
    if not any(r["t_roof_us"] for r in rows):
        return None
    series = {
        "roofline T_roof": [r["t_roof_us"] for r in rows],
        "solution": [r["solution_us"] for r in rows],
        "reference": [r["reference_us"] for r in rows],
    }
    return charts.bar([r["name"] for r in rows], series, "shape", "time (µs, log scale)", y_log=True)


def number_runs(evaluations) -> None:
    """Set `run` on each evaluation: 1 for a submission's first on a hardware, 2 for the first
    rerun there, and so on (in the order they were created)."""
    seen: dict[tuple[int, int], int] = {}
    for ev in sorted(evaluations, key=lambda e: e.pk):
        key = (ev.submission_id, ev.hardware_id)
        seen[key] = ev.run = seen.get(key, 0) + 1


def evaluation_view(
    ev: Evaluation, problem: Problem, position: int | None, detailed: bool, queue: dict | None = None
) -> dict:
    """`queue`, for a queued evaluation: its queue's length and the workers serving it (None: unknown)."""
    doc = ev.result or {}
    queue = queue or {}
    rows = shape_rows(doc, problem) if detailed else []
    correct = ev.status == Status.CORRECT
    return {
        "evaluation": ev,
        "position": position,
        "queue_length": queue.get("length"),
        "workers": queue.get("workers"),
        "run": getattr(ev, "run", 1),
        "progress": progress(ev),
        "status_text": STATUS_TEXT.get(ev.status or "", ""),
        "correct": correct,
        "reason": ev.reason or doc.get("reason", ""),
        "failing_rank": doc.get("failing_rank"),
        "timings_meaningful": doc.get("timings_meaningful", True),
        "shapes": rows,
        "speedup_chart": speedup_chart(rows) if correct else None,
        "speedup_chart_id": f"speedup-chart-{ev.pk}",
        "roofline_chart_id": f"roofline-chart-{ev.pk}",
        "roofline_chart": roofline_chart(rows) if correct else None,
        "environment": doc.get("environment") or {},
        "log_tail": doc.get("log_tail", ""),
    }
