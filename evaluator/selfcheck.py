"""Every reference as its own solution, and a perturbed copy, in one launch of N ranks (and another
for the problems after one whose player died): proves the references run under a mode and that the
checks can fail. `python -m evaluator selfcheck`."""

from __future__ import annotations

import secrets
from typing import Any

from evaluator.launch import EvaluationRequest, EvaluatorError, ProgressFn, run_ranks
from evaluator.results import Side, Status

SEED_BITS = 48  # the trials' seeds are offsets from one base seed: room below torch's 64-bit seeds
MIN_LAUNCH_S = 30.0  # a fresh launch for the problems after a dead player needs at least this long


def run_selfcheck(ids: list[str], world_size: int, mode: str = "cpu", shape: str | None = None,
                  trials: int = 2, timeout_s: float = 900.0, seed: int | None = None,
                  on_progress: ProgressFn | None = None) -> dict[str, Any]:
    """`seed`: the base of every trial's seeds (drawn when None); the report names it, so a failure
    that depends on the draw can be run again. A problem whose player process dies ends its launch
    (the other ranks' players may be stuck in a collective with it); the problems after it run in a
    fresh launch, within what is left of `timeout_s`."""
    import tasks

    for pid in ids:
        tasks.get(pid)
    if seed is None:
        seed = secrets.randbits(SEED_BITS)
    if not isinstance(seed, int) or not 0 <= seed < 1 << SEED_BITS:
        raise ValueError(f"seed must be an integer in [0, 2**{SEED_BITS}), not {seed!r}")
    runnable = [pid for pid in ids if world_size in tasks.get(pid).world_sizes]
    report: dict[str, Any] = {"world_size": world_size, "mode": mode, "seed": seed, "wall_s": 0.0, "problems": {},
                              "launches": 0}
    errors: list[str] = []  # what ended each launch that ended early
    first = 0  # index in `runnable` of the next launch's first problem (the trials' seeds follow it)
    while first < len(runnable):
        left_s = timeout_s - report["wall_s"]
        if left_s < MIN_LAUNCH_S:
            for pid in runnable[first:]:
                report["problems"][pid] = {"reference": "not reached", "perturbed": "not reached",
                                           "reason": "the time limit was spent on earlier problems"}
            break
        rows, stuck, wall_s, error = _launch(runnable, first, world_size, mode, shape, trials, left_s, seed, on_progress)
        report["problems"].update(rows)
        errors += [error] if error else []
        report["wall_s"] += wall_s
        report["launches"] += 1
        if stuck is None:
            break
        first = runnable.index(stuck) + 1
    if errors:
        report["error"] = "\n\n".join(errors)
    for pid in ids:
        if pid not in runnable:
            report["problems"][pid] = {"reference": "skipped", "perturbed": "skipped",
                                       "reason": f"world size {world_size} not supported"}
    return report


def _launch(runnable: list[str], first: int, world_size: int, mode: str, shape: str | None, trials: int,
            timeout_s: float, seed: int, on_progress: ProgressFn | None) -> tuple[dict, str | None, float, str | None]:
    """One launch checking runnable[first:]: (rows, the problem that ended it early or None, wall s,
    what went wrong or None). A launch that ended in a time-out leaves the problems after the stuck
    one "not reached"."""
    problems = runnable[first:]
    req = EvaluationRequest(
        problem="selfcheck", solution_code="", world_size=world_size, mode=mode, trials=trials, iters=0,
        warmup=0, timeout_s=timeout_s, selfcheck={"problems": problems, "seed": seed, "first": first},
    )
    req.validate()
    shapes = [{"name": shape or "", "dims": {}, "default": True}]
    checked: dict[str, dict] = {}  # rows as rank 0 sends them: a launch cut short keeps them

    def keep_row(stage: str, detail: dict) -> None:
        if isinstance(detail.get("row"), dict) and detail.get("problem") in problems:
            checked[detail["problem"]] = detail["row"]
        if on_progress is not None:
            on_progress(stage, detail)

    ranks, outcome, wall_s = run_ranks(req, {"kind": "selfcheck"}, shapes, keep_row)
    if outcome["tampered"]:
        raise EvaluatorError(outcome["tampered"])
    final = ranks[0].final
    if final and "selfcheck" in final:
        return final["selfcheck"], None, wall_s, None
    from evaluator.assemble import _log_tail, _status

    status, reason, _, detail, _ = _status(ranks, outcome)
    stuck = next((pid for pid in problems if pid not in checked), None)
    rows = dict(checked)
    for pid in problems:
        rows.setdefault(pid, {"reference": status if pid == stuck else "not reached", "perturbed": "not reached",
                              "reason": reason if pid == stuck else "an earlier problem ended the launch"})
    error = f"{stuck}: {status}: {reason}\n{detail}\n{_log_tail(ranks)}"
    return rows, (stuck if not outcome["timed_out"] else None), wall_s, error


def trial_seeds(base: int, index: int, trial: int, rank: int) -> dict[str, int]:
    """Seeds of trial `trial` of the `index`-th problem checked, on `rank`."""
    shared = base + 1000 * index + 10 * trial
    return {"seed": shared + rank * 7919, "shared_seed": shared}


def run_rank(j) -> None:
    """Judge side (called by evaluator.rank with a Judge): the solution's players run each
    problem's reference, then a perturbed copy of it."""
    import tasks
    from evaluator.judge import Verdict

    cfg = j.cfg
    problems, base = cfg["selfcheck"]["problems"], cfg["selfcheck"]["seed"]
    first = int(cfg["selfcheck"].get("first", 0))  # the problems' indices in the whole check, for their seeds
    j.cfg = {**cfg, "problem": {"kind": "suite", "id": problems[0]}}
    j.start()
    shape_name = cfg["shapes"][0]["name"]
    outcome: dict[str, dict] = {}
    for n, pid in enumerate(problems):
        spec = tasks.get(pid)
        chosen = spec.default_shape if shape_name == "default" else spec.shape(shape_name) if shape_name else spec.shapes[0]
        dims = dict(chosen.dims)
        target = {"kind": "suite", "id": pid}
        j.select_problem(target)
        j.guarded(j.load, Side.REFERENCE, target)
        row: dict[str, str] = {}
        for variant in ("reference", "perturbed"):
            j.progress(f"{pid} {variant}")  # a time-out names the problem it stopped in
            status = Status.CORRECT
            try:
                j.guarded(j.load, Side.SOLUTION, target, variant == "perturbed")
                for t in range(cfg["trials"]):
                    seeds = trial_seeds(base, first + n, t, j.rank)
                    j.out_capacity = 0
                    j.pair(lambda seeds=seeds, dims=dims: [j.inputs(dims, seeds["seed"], seeds["shared_seed"])])
            except Verdict as verdict:
                if verdict.gone is not None:  # a player is gone: this launch ends (Judge.guarded)
                    raise
                status = verdict.status
                if variant == "reference" or status != Status.INCORRECT:
                    row["reason"] = f"{variant}: rank {verdict.origin}: {verdict.reason}"
            row[variant] = status
        outcome[pid] = row
        j.progress(f"{pid} checked", problem=pid, row=row)
    j.channel.send({"type": "final", "rank": j.rank, "status": Status.CORRECT, "selfcheck": outcome, "shapes": []})


