"""The L2 policy: does pushing the inputs out of the GPU's L2 before every call move small shapes'
speedups? The evaluator flushes nothing between calls; inputs are fresh each call, written by the
judge just before the batch, so a small shape reads them warm on both sides alike. This judges, on
each problem's smallest shape, the reference against an identical copy of itself (true speedup 1)
and against the reference called twice per call (0.5 when warmth does not matter: with a flush the
second of the two calls still reads warm inputs, so a speedup above 0.5 there shows what L2 is
worth), each without and with a write of --flush-mib MiB before every call (timed and null
batches alike, so the flush's own time is subtracted).

    python bench/l2_policy.py --mode gpu --world-size 1 [--problems allgather,tp_muon_orthogonalization]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

import tasks  # noqa: E402
from evaluator import calibration  # noqa: E402
from evaluator.launch import EvaluationRequest, evaluate  # noqa: E402

DEFAULT_PROBLEMS = "allgather,fp8_reduce_scatter_grads,tp_muon_orthogonalization"


def judge(problem: str, shape: str, code: str, flush_mib: float, args) -> dict:
    doc = evaluate(EvaluationRequest(
        problem=problem, solution_code=code, world_size=args.world_size, mode=args.mode, shapes=[shape],
        trials=1, warmup=args.warmup, iters=args.iters, timeout_s=args.timeout, flush_l2_mib=flush_mib,
    ))  # fmt: skip
    s = doc["shapes"][0] if doc["shapes"] else {}
    return {"status": doc["status"], "reason": doc["reason"], "speedup": s.get("speedup"),
            "interval": s.get("speedup_interval"), "reference_us": (s.get("reference") or {}).get("time_us")}


def cell(row: dict) -> str:
    if row["speedup"] is None:
        return f"[red]{row['status']}"
    low, high = row["interval"] or (float("nan"), float("nan"))
    return f"{row['speedup']:.3f} [{low:.3f}-{high:.3f}] ({row['reference_us']:.1f} us)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mode", default="gpu", choices=["cpu", "shared-gpu", "gpu"])
    parser.add_argument("--world-size", type=int, default=1)
    parser.add_argument("--problems", default=DEFAULT_PROBLEMS)
    parser.add_argument("--flush-mib", type=float, default=256.0, help="bytes written before each call (L2 is 50 MiB on H100/H200)")
    parser.add_argument("--warmup", type=int, default=100)
    parser.add_argument("--iters", type=int, default=100)
    parser.add_argument("--timeout", type=float, default=300)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    console = Console(width=180)
    rows = []
    for pid in args.problems.split(","):
        shape = tasks.get(pid).shapes[0].name
        for label, code in (("identical", tasks.reference_source(pid)), ("called 2x", calibration.repeated(pid, 2))):
            row = {"problem": pid, "shape": shape, "solution": label}
            for key, mib in (("kept", 0.0), ("flushed", args.flush_mib)):
                row[key] = judge(pid, shape, code, mib, args)
                console.print(f"{pid} {shape} {label} L2 {key}: {cell(row[key])}")
            rows.append(row)
            if args.json:
                args.json.write_text(json.dumps(rows, indent=1))
    table = Table(title=f"speedups with L2 kept and flushed ({args.flush_mib:g} MiB written before every call)")
    for col in ("problem", "shape", "solution", "L2 kept", "L2 flushed", "shift"):
        table.add_column(col)
    for r in rows:
        a, b = r["kept"]["speedup"], r["flushed"]["speedup"]
        shift = f"{100 * (b / a - 1):+.1f}%" if a and b else "-"
        table.add_row(r["problem"], r["shape"], r["solution"], cell(r["kept"]), cell(r["flushed"]), shift)
    console.print(table)


if __name__ == "__main__":
    main()
