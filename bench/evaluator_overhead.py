"""Wall time of whole evaluations, broken down by stage: start-up (processes, imports, process
group), build, correctness trials, input sets, warm-up, timed iterations, post-timing check, digests.

    python bench/evaluator_overhead.py --mode gpu --world-size 1 [--problem allgather] [--solution FILE]

Runs the evaluation twice: the first builds the solution's extension, the second finds it cached.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from evaluator.launch import EvaluationRequest, evaluate  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--problem", default="allgather")
    parser.add_argument("--solution", type=Path, default=ROOT / "examples" / "solutions" / "allgather_symm_mem.py")
    parser.add_argument("--mode", default="gpu")
    parser.add_argument("--world-size", type=int, default=1)
    parser.add_argument("--warmup", type=int, default=500)
    parser.add_argument("--iters", type=int, default=100)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--shape", action="append", dest="shapes", help="shape name (repeatable); default: all")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    code = args.solution.read_text()
    docs = []
    for run in range(args.runs):
        t0 = time.perf_counter()
        doc = evaluate(EvaluationRequest(problem=args.problem, solution_code=code, world_size=args.world_size,
                                         mode=args.mode, warmup=args.warmup, iters=args.iters,
                                         shapes=args.shapes))
        wall = time.perf_counter() - t0
        docs.append(doc)
        print(f"run {run + 1}: {doc['status']} in {wall:.2f} s wall")
        for stage, seconds in doc["stages"].items():
            print(f"  {stage:12s} {seconds:8.3f} s")
        for s in doc["shapes"]:
            sol, ref = s["solution"] or {}, s["reference"] or {}
            print(f"  shape {s['name']:8s} solution {sol.get('time_us', 0):9.1f} us  reference "
                  f"{ref.get('time_us', 0):9.1f} us  speedup {s['speedup'] or 0:.2f}x")
    if args.json:
        args.json.write_text(json.dumps(docs, indent=1))


if __name__ == "__main__":
    main()
