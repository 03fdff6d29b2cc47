"""Every reference as its own solution, and a perturbed copy, in one launch of N ranks: proves the
references run under a mode and that the checks can fail. `python -m evaluator selfcheck`."""

from __future__ import annotations

import secrets
from typing import Any

from evaluator.launch import EvaluationRequest, EvaluatorError, run_ranks


def run_selfcheck(ids: list[str], world_size: int, mode: str = "cpu", shape: str | None = None,
                  trials: int = 2, timeout_s: float = 900.0) -> dict[str, Any]:
    import tasks

    for pid in ids:
        tasks.get(pid)
    runnable = [pid for pid in ids if world_size in tasks.get(pid).world_sizes]
    req = EvaluationRequest(
        problem="selfcheck", solution_code="", world_size=world_size, mode=mode, trials=trials, iters=0,
        warmup=0, timeout_s=timeout_s, selfcheck=runnable,
    )
    shapes = [{"name": shape or "", "dims": {}, "default": True}]
    ranks, outcome, wall_s = run_ranks(req, {"kind": "selfcheck"}, shapes, lambda stage, detail: None)
    report: dict[str, Any] = {"world_size": world_size, "mode": mode, "wall_s": wall_s, "problems": {}}
    final = ranks[0].final
    if not final or "selfcheck" not in final:
        from evaluator.assemble import _log_tail, _status

        status, reason, _, detail = _status(ranks, outcome)
        report["error"] = f"{status}: {reason}\n{detail}\n{_log_tail(ranks)}"
    else:
        report["problems"] = final["selfcheck"]
    for pid in ids:
        if pid not in runnable:
            report["problems"][pid] = {"reference": "skipped", "perturbed": "skipped",
                                       "reason": f"world size {world_size} not supported"}
    if outcome["tampered"]:
        raise EvaluatorError(outcome["tampered"])
    return report


def run_rank(h) -> None:
    """Rank side (called by evaluator.rank with a Harness)."""
    import tasks
    from evaluator import checks
    from evaluator.harness import Verdict
    from evaluator.loading import load_problem

    cfg = h.cfg
    h.cfg = {**cfg, "problem": {"kind": "suite", "id": cfg["selfcheck"][0]}} if cfg["selfcheck"] else cfg
    h.start()
    shape_name = cfg["shapes"][0]["name"]
    outcome: dict[str, dict] = {}
    base = int.from_bytes(secrets.token_bytes(6), "little") if h.rank == 0 else 0
    base = h_broadcast(h, base)
    for n, pid in enumerate(cfg["selfcheck"]):
        spec = tasks.get(pid)
        chosen = spec.default_shape if shape_name == "default" else spec.shape(shape_name) if shape_name else spec.shapes[0]
        dims = dict(chosen.dims)
        h.problem = load_problem({"kind": "suite", "id": pid})
        reference = h.problem.reference
        last = h.rank == h.world - 1

        def perturbed(*inputs, reference=reference, last=last):
            out = reference(*inputs)
            return checks.perturb_(out) if last else out

        row: dict[str, str] = {}
        for variant, fn in (("reference", reference), ("perturbed", perturbed)):
            h.progress(f"{pid} {variant}")  # a time-out names the problem it stopped in
            h.solution = fn
            status = "correct"
            try:
                for t in range(cfg["trials"]):
                    seed = base + 1000 * n + 10 * t
                    h.trial(dims, {"seed": seed + h.rank * 7919, "shared_seed": seed})
            except Verdict as verdict:
                status = verdict.status
                if variant == "reference" or status != "incorrect":
                    row["reason"] = f"{variant}: rank {verdict.origin}: {verdict.reason}"
            row[variant] = status
        outcome[pid] = row
    h.channel.send({"type": "final", "rank": h.rank, "status": "correct", "selfcheck": outcome, "shapes": []})


def h_broadcast(h, value: int) -> int:
    import torch.distributed as dist

    box = [value]
    dist.broadcast_object_list(box, src=0, group=h.group)
    return box[0]
