"""Honest error of every float problem's reference, against the tolerance in force.

    python bench/tolerance_margins.py [--world-sizes 2,4] [--seeds 3] [--shape NAME] [--problems a,b]
                                      [--json PATH]

W processes on the CPU in one gloo group (as tests/test_problems_collectives_tp.py starts them).
Per problem and seed, every rank draws its inputs as the judge does (evaluator.judge.draw_inputs)
and runs the reference on them, then again as honest variants whose outputs are compared with the
reference's, element by element, the way the judge compares a solution's:

- `fp64`: the inputs upcast to float64 (exact), the reference run in float64, each output rounded
  to the reference output's dtype: the correctly rounded result, what an ideal kernel returns;
- `reversed`: the reference with every floating-point SUM reduction across ranks (all_reduce,
  reduce, reduce_scatter_tensor) done by gathering the ranks' values and adding them in reverse
  rank order, rounding to the dtype after each addition (a ring's order, reversed);
- `fp32`: the same reductions accumulated in fp32 and rounded once (a fused kernel's).

Per output (in-place inputs after the outputs, as the judge indexes them), over every rank and
seed: the worst |variant - reference| (`err`), the same over the reference output's root mean
square (`err/rms`), the worst relative error where |reference| > rms (`rel`), the error beyond the
tolerance's rtol over the rms (`need/rms`: the smallest atol in rms units it needs), the tolerance in
force at that world size, and its margin: the smallest ratio, over elements, of what the tolerance
admits to the error found (1 means at the edge, below 1 judged wrong).
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import multiprocessing
import os
import sys
import tempfile
import warnings
from typing import Any

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

warnings.filterwarnings("ignore", category=FutureWarning, message=".*is deprecated")

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import tasks  # noqa: E402
from evaluator import checks  # noqa: E402
from evaluator.judge import draw_inputs  # noqa: E402
from evaluator.loading import load_problem  # noqa: E402

VARIANTS = ("fp64", "reversed", "fp32")


def float_problems() -> list[str]:
    return [pid for pid, p in tasks.problems().items() if not p.bitwise]


def upcast(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.detach().double() if value.is_floating_point() else value.clone()
    if isinstance(value, torch.nn.Module):
        return copy.deepcopy(value).double()
    if isinstance(value, (tuple, list)):
        return type(value)(upcast(v) for v in value)
    if isinstance(value, dict):
        return {k: upcast(v) for k, v in value.items()}
    return value


class ReorderedSums:
    """While active, SUM reductions of floating-point tensors across ranks gather every rank's
    values and add them in reverse rank order, rounding after each addition (`reversed`), or in
    fp32 rounded once (`fp32`). Other collectives are the process group's."""

    def __init__(self, variant: str):
        self.variant = variant
        self.saved: dict[str, Any] = {}

    def _total(self, tensor: torch.Tensor, group) -> torch.Tensor:
        parts = [torch.empty_like(tensor) for _ in range(dist.get_world_size(group))]
        self.saved["all_gather"](parts, tensor.contiguous(), group=group)
        if self.variant == "fp32":
            return torch.stack([p.float() for p in parts]).sum(0).to(tensor.dtype)
        out = parts[-1].clone()
        for p in reversed(parts[:-1]):
            out = out + p
        return out

    def _sums(self, tensor: torch.Tensor, op) -> bool:
        return tensor.is_floating_point() and op == dist.ReduceOp.SUM

    def all_reduce(self, tensor, op=dist.ReduceOp.SUM, group=None, async_op=False):
        if not self._sums(tensor, op):
            return self.saved["all_reduce"](tensor, op=op, group=group, async_op=async_op)
        tensor.copy_(self._total(tensor, group))

    def reduce(self, tensor, dst, op=dist.ReduceOp.SUM, group=None, async_op=False):
        if not self._sums(tensor, op):
            return self.saved["reduce"](tensor, dst, op=op, group=group, async_op=async_op)
        total = self._total(tensor, group)
        if dist.get_rank() == dst:
            tensor.copy_(total)

    def reduce_scatter_tensor(self, output, input, op=dist.ReduceOp.SUM, group=None, async_op=False):
        if not self._sums(input, op):
            return self.saved["reduce_scatter_tensor"](output, input, op=op, group=group, async_op=async_op)
        total = self._total(input, group)
        index = dist.get_rank(group)
        output.copy_(total.reshape(dist.get_world_size(group), -1)[index].view_as(output))

    def __enter__(self):
        for name in ("all_reduce", "reduce", "reduce_scatter_tensor", "all_gather"):
            self.saved[name] = getattr(dist, name)
        for name in ("all_reduce", "reduce", "reduce_scatter_tensor"):
            setattr(dist, name, getattr(self, name))
        return self

    def __exit__(self, *exc):
        for name, fn in self.saved.items():
            setattr(dist, name, fn)


def results_of(inputs: tuple, out: Any, mutates: tuple[int, ...]) -> list[list[torch.Tensor]]:
    """Tensors per tolerance index: each top-level output, then each in-place input."""
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    return [checks.tensors(o) for o in outs] + [checks.tensors(inputs[i]) for i in mutates]


def run_variant(reference, inputs: tuple, variant: str | None):
    args = upcast(inputs) if variant == "fp64" else checks.clone_tree(inputs)
    if variant in ("reversed", "fp32"):
        with ReorderedSums(variant):
            out = reference(*args)
    else:
        out = reference(*args)
    return args, out


def empty_stats() -> dict:
    return {"err": 0.0, "err_rms": 0.0, "rel": 0.0, "need_rms": 0.0, "margin": math.inf, "failed": ""}


def accumulate(stats: dict, got: torch.Tensor, exp: torch.Tensor, tol) -> None:
    g = got.detach().to(exp.dtype).double()  # the variant's result rounded to the output's dtype
    e = exp.detach().double()
    finite = torch.isfinite(e)
    if not bool(finite.any()):
        return
    err = (g - e).abs().where(finite, torch.zeros_like(e))
    rms = float(e[finite].square().mean().sqrt())
    worst = float(err.max())
    stats["err"] = max(stats["err"], worst)
    if rms > 0:
        stats["err_rms"] = max(stats["err_rms"], worst / rms)
        large = finite & (e.abs() > rms)
        if bool(large.any()):
            stats["rel"] = max(stats["rel"], float((err[large] / e[large].abs()).max()))
        beyond_rtol = float((err - tol.rtol * e.abs()).where(finite, torch.zeros_like(e)).max())
        stats["need_rms"] = max(stats["need_rms"], beyond_rtol / rms)
    if tol.bitwise:
        if worst > 0:
            stats["margin"] = 0.0
        return
    allowed = checks.allowed_error(e, tol)
    hit = err > 0
    if bool(hit.any()):
        stats["margin"] = min(stats["margin"], float((allowed[hit] / err[hit]).min()))


def measure_rank(rank: int, world: int, store: str, out_dir: str, ids: list[str], seeds: int, shape: str | None):
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world)
    found: dict[str, dict] = {}
    for pid in ids:
        spec = tasks.get(pid)
        if world not in spec.world_sizes:
            continue
        problem = load_problem({"kind": "suite", "id": pid})
        dims = dict((spec.shape(shape) if shape else spec.shapes[0]).dims)
        per_output: dict[str, dict] = {}
        for seed in range(seeds):
            shared_seed = 10_000 + seed
            inputs = draw_inputs(problem, rank, world, dims, 1000 * seed + rank * 7919, shared_seed, torch.device("cpu"))
            ref_args, ref_out = run_variant(problem.reference, inputs, None)
            expected = results_of(ref_args, ref_out, spec.mutates)
            for variant in VARIANTS:
                key_of = lambda i, variant=variant: f"{i}:{variant}"  # noqa: E731
                try:
                    args, out = run_variant(problem.reference, inputs, variant)
                    got = results_of(args, out, spec.mutates)
                except Exception as exc:  # noqa: BLE001 - a reference that cannot run in float64 is reported
                    for i in range(len(expected)):
                        per_output.setdefault(key_of(i), empty_stats())["failed"] = f"{type(exc).__name__}: {exc}"[:120]
                    continue
                for i, (gs, es) in enumerate(zip(got, expected)):
                    stats = per_output.setdefault(key_of(i), empty_stats())
                    tol = spec.tolerance_for(i, world)
                    for g, e in zip(gs, es):
                        if e.is_floating_point() and e.dtype != torch.float8_e4m3fn:
                            accumulate(stats, g, e, tol)
        found[pid] = per_output
        dist.barrier()
    with open(os.path.join(out_dir, f"{rank}.json"), "w") as f:
        json.dump(found, f)
    dist.barrier()
    os._exit(0)  # every file is written; skip gloo's slow teardown


def measure(world: int, ids: list[str], seeds: int, shape: str | None) -> dict:
    with tempfile.TemporaryDirectory() as out_dir:
        multiprocessing.get_context("forkserver").set_forkserver_preload(["torch", "torch.distributed", "tasks"])
        mp.start_processes(measure_rank, args=(world, os.path.join(out_dir, "store"), out_dir, ids, seeds, shape),
                           nprocs=world, start_method="forkserver")
        per_rank = [json.load(open(os.path.join(out_dir, f"{r}.json"))) for r in range(world)]
    merged: dict[str, dict] = {}
    for found in per_rank:
        for pid, outputs in found.items():
            for key, s in outputs.items():
                m = merged.setdefault(pid, {}).setdefault(key, empty_stats())
                for name in ("err", "err_rms", "rel", "need_rms"):
                    m[name] = max(m[name], s[name])
                m["margin"] = min(m["margin"], s["margin"])
                m["failed"] = m["failed"] or s["failed"]
    return merged


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--world-sizes", default="2,4")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--shape", default=None, help="a shape name (default: each problem's first, the smallest)")
    parser.add_argument("--problems", default=None, help="comma-separated ids (default: every non-bitwise problem)")
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    ids = args.problems.split(",") if args.problems else float_problems()
    report: dict[str, Any] = {"seeds": args.seeds, "shape": args.shape or "first", "worlds": {}}
    print(f"{'problem':32} {'W':>2} {'out':>3} {'variant':8} {'err':>9} {'err/rms':>9} {'rel':>8} {'need/rms':>8} "
          f"{'margin':>8}  tolerance")
    for world in map(int, args.world_sizes.split(",")):
        merged = measure(world, ids, args.seeds, args.shape)
        report["worlds"][world] = merged
        for pid in ids:
            for key, s in merged.get(pid, {}).items():
                index, variant = key.split(":")
                tol = tasks.get(pid).tolerance_for(int(index), world)
                if s["failed"]:
                    print(f"{pid:32} {world:2} {index:>3} {variant:8} not run: {s['failed']}")
                    continue
                print(f"{pid:32} {world:2} {index:>3} {variant:8} {s['err']:9.3g} {s['err_rms']:9.3g} {s['rel']:8.3g} "
                      f"{s['need_rms']:8.3g} {s['margin']:8.3g}  {tol.describe()}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()
