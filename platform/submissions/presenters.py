"""What the submission page shows of an evaluation: progress, the per-shape table, per-rank
statistics and chart configurations, all read from the stored result document.

Who sees what: a correct evaluation's figures are public. Where a failed one went wrong (the
reason, the rank, the shape, the worst element, the log, which may quote the source and name the
host's paths) is for the code's owner and admins only (`Submission.code_visible_to`); everyone
else sees its status. `public_result` is the API's view of the document under the same rule."""

from __future__ import annotations

from catalog.models import Problem
from common import charts
from evaluator.results import Stage, Status, allocator_note
from submissions.models import Evaluation

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


def shape_rows(doc: dict, problem: Problem, roofline: bool = True) -> list[dict]:
    """`roofline`: whether the GPU roofline applies to the evaluation (`Evaluation.has_roofline`); where
    it does not, the document's T_roof (GPU numbers) is left out."""
    dims = {s["name"]: s["dims"] for s in problem.shapes}
    rows = []
    for shape in doc.get("shapes") or []:
        roof = (shape.get("roofline") or {}) if roofline else {}
        run = shape.get("timing_run") or {}
        note = allocator_note(run.get("allocator"))
        rows.append(
            {
                "name": shape["name"],
                "dims": ", ".join(f"{k}={v}" for k, v in (shape.get("dims") or dims.get(shape["name"], {})).items()),
                "correct": shape.get("correct"),
                "max_abs_error": shape.get("max_abs_error"),
                "solution_us": _time(shape.get("solution")),
                "reference_us": _time(shape.get("reference")),
                "speedup": shape.get("speedup"),
                "speedup_interval": shape.get("speedup_interval"),
                "t_roof_us": roof.get("t_roof_us"),
                "utilization": roof.get("utilization"),
                "bound": roof.get("bound"),
                "notes": (shape.get("notes") or []) + ([note] if note else []),
                "per_rank": _per_rank(shape),
                "pairs_us": run.get("pairs_us") or [],
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
    """Speedup over the shapes, from the smallest: a line needs two shapes with a speedup (one is
    read from the table above it)."""
    if sum(1 for r in rows if r["speedup"]) < 2:
        return None
    return charts.line(
        [f"{r['name']} ({r['dims']})" for r in rows],
        {"speedup": [r["speedup"] for r in rows]},
        "shape",
        "speedup over the reference (x)",
    )


def pairs_chart(rows: list[dict]) -> dict | None:
    """Each timed pair's speedup (reference time over solution time), per shape in the order timed:
    the samples behind the median and its interval, where a drift or an order effect shows."""
    series = {r["name"]: [ref / sol if sol > 0 else None for ref, sol in r["pairs_us"]] for r in rows if r["pairs_us"]}
    if not series:
        return None
    longest = max(len(v) for v in series.values())
    padded = {name: values + [None] * (longest - len(values)) for name, values in series.items()}
    return charts.line(list(range(1, longest + 1)), padded, "timed pair (the reference ran first in odd ones)",
                       "speedup of the pair (x)")


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


# Keys of the result document that say where and why a failed evaluation went wrong, and the
# environment's facts about the host: for the code's owner and admins only.
PRIVATE_KEYS = ("reason", "failing_rank", "failure", "log_tail")
PRIVATE_ENVIRONMENT = ("hostname",)
PUBLIC_SHAPE_KEYS_WHEN_FAILED = ("name", "dims", "default")


def public_result(doc: dict | None) -> dict | None:
    """The document as anyone may read it: a failed evaluation's status without its whereabouts."""
    if doc is None:
        return None
    public = {k: v for k, v in doc.items() if k not in PRIVATE_KEYS}
    public["environment"] = {k: v for k, v in (doc.get("environment") or {}).items() if k not in PRIVATE_ENVIRONMENT}
    if doc.get("status") != Status.CORRECT:
        public["shapes"] = [
            {k: v for k, v in shape.items() if k in PUBLIC_SHAPE_KEYS_WHEN_FAILED} for shape in doc.get("shapes") or []
        ]
    return public


def failure_view(doc: dict, rows: list[dict], trials: int | None) -> dict:
    """Where a failed evaluation went wrong, as the evaluator gave it. Documents before schema 3 carry
    no `failure`: their failing shape is the first one not found correct."""
    failure = doc.get("failure") or {}
    shape = failure.get("shape")
    if shape is None and not failure:
        shape = next((r["name"] for r in rows if r["correct"] is not True), None)
    step = failure.get("step") or ""
    return {
        "reason": doc.get("reason", ""),
        "rank": failure.get("rank", doc.get("failing_rank")),
        "world_size": doc.get("world_size"),
        "shape": shape,
        "step": step,
        "call": failure.get("call"),
        "calls": failure.get("calls"),
        "mismatch": failure.get("mismatch"),
        "steps": steps(step, trials) if shape else [],
        "log_tail": doc.get("log_tail", ""),
    }


def steps(failed: str, trials: int | None) -> list[dict]:
    """What a shape runs, in order (its correctness trials, warm-up, timing, the public trial), each
    passed, failed (the first failure: the evaluator stops there) or not run."""
    names = [f"trial {i} of {trials}" for i in range(1, (trials or 0) + 1)] + ["warm-up", "timing", "public trial"]
    if failed not in names:
        return []
    at = names.index(failed)
    return [
        {"name": n, "state": "passed" if i < at else "failed" if i == at else "not run"} for i, n in enumerate(names)
    ]


def evaluation_view(
    ev: Evaluation, problem: Problem, position: int | None, details: bool, queue: dict | None = None
) -> dict:
    """`details`: the viewer may see where a failed evaluation went wrong (owner or admin).
    `queue`, for a queued evaluation: its queue's length and the workers serving it (None: unknown)."""
    doc = ev.result or {}
    queue = queue or {}
    correct = ev.status == Status.CORRECT
    roofline = ev.has_roofline
    rows = shape_rows(doc, problem, roofline) if correct or details else []
    failure = None
    if details and ev.state == "done" and not correct and doc:
        failure = failure_view(doc, rows, (doc.get("settings") or {}).get("trials"))
        reached = True
        for row in rows:  # the failing shape, and those after it that never ran
            row["failing"] = row["name"] == failure["shape"]
            row["not_run"] = not reached and row["correct"] is not True
            reached = reached and not row["failing"]
    environment = doc.get("environment") or {}
    if not details:
        environment = {k: v for k, v in environment.items() if k not in PRIVATE_ENVIRONMENT}
    return {
        "evaluation": ev,
        "position": position,
        "queue_length": queue.get("length"),
        "workers": queue.get("workers"),
        "run": getattr(ev, "run", 1),
        "progress": progress(ev),
        "status_text": STATUS_TEXT.get(ev.status or "", ""),
        "correct": correct,
        "details": details,
        "failure": failure,
        "infrastructure_reason": ev.reason if details and ev.state == "failed" else "",
        "timings_meaningful": doc.get("timings_meaningful", True),
        "roofline": roofline,
        "shapes": rows,
        "speedup_chart": speedup_chart(rows) if correct else None,
        "speedup_chart_id": f"speedup-chart-{ev.pk}",
        "pairs_chart": pairs_chart(rows) if correct else None,
        "pairs_chart_id": f"pairs-chart-{ev.pk}",
        "roofline_chart_id": f"roofline-chart-{ev.pk}",
        "roofline_chart": roofline_chart(rows) if correct else None,
        "environment": environment,
        "log_tail": doc.get("log_tail", "") if details else "",
    }
