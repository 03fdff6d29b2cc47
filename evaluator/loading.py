"""Loading: the problem's torch half (from our suite or from a ParallelKernelBench checkout) for a
judge, and what a player runs (the submitted solution module, or a reference)."""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

import tasks
from evaluator.results import FailureKind
from tasks.spec import InputContext, Tolerance

PKB_TOLERANCE = Tolerance(atol=1e-2, rtol=1e-2, reason="the public suite's allclose tolerance")
SOLUTION_MODULE = "pkb_solution"


@dataclass
class LoadedProblem:
    id: str
    dtype: torch.dtype
    make_inputs: Callable[[InputContext], tuple]
    reference: Callable[..., Any]
    # (output index, world size) -> the tolerance in force
    tolerance_for: Callable[[int, int], Tolerance]
    # Inputs the solution may modify; None means "whatever the reference itself modifies".
    mutates: tuple[int, ...] | None
    # Inputs whose state after the call is compared with the reference's; None: as for mutates.
    inplace_results: tuple[int, ...] | None
    # Judged bit for bit: its output digests are compared across hardware.
    bitwise: bool = False


def load_problem(source: dict) -> LoadedProblem:
    if source["kind"] == "suite":
        spec = tasks.get(source["id"])
        module = tasks.load_reference(spec.id)
        return LoadedProblem(
            id=spec.id,
            dtype=getattr(torch, spec.dtype),
            make_inputs=module.make_inputs,
            reference=module.solution,
            tolerance_for=spec.tolerance_for,
            mutates=spec.mutates,
            inplace_results=spec.inplace_results,
            bitwise=spec.bitwise,
        )
    if source["kind"] == "pkb":
        return _load_pkb(Path(source["root"]), int(source["id"]), source.get("dtype", "bfloat16"))
    raise ValueError(f"unknown problem source {source!r}")


def pkb_reference_file(root: Path, problem_id: int) -> Path:
    matches = sorted((root / "reference").glob(f"{problem_id}_*.py"))
    if len(matches) != 1:
        raise FileNotFoundError(f"expected one reference/{problem_id}_*.py under {root}, found {len(matches)}")
    return matches[0]


def _import_file(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _load_pkb(root: Path, problem_id: int, dtype: str) -> LoadedProblem:
    """The public layout: utils/input_output_tensors.py's create_input_tensor and
    reference/<id>_<name>.py's solution. Its public seeding is replaced by our secret one: the
    `trial` argument carries a secret-derived number."""
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    io_module = importlib.import_module("utils.input_output_tensors")
    reference = _import_file(f"pkb_reference_{problem_id}", pkb_reference_file(root, problem_id))
    torch_dtype = getattr(torch, dtype)

    def make_inputs(ctx: InputContext) -> tuple:
        # The same on every rank, as the public harness passes it: its generators seed with the
        # rank themselves and derive shared structure (per-rank counts) from the trial.
        secret_trial = int(ctx.shared_rng.initial_seed() % (1 << 31))
        base_shape = (ctx.dims["M"], ctx.dims["N"])
        return tuple(
            io_module.create_input_tensor(
                ctx.rank, ctx.world_size, problem_id, base_shape, torch_dtype, trial=secret_trial, device=ctx.device
            )
        )

    return LoadedProblem(
        id=f"pkb:{problem_id}",
        dtype=torch_dtype,
        make_inputs=make_inputs,
        reference=reference.solution,
        tolerance_for=lambda _i, _w: PKB_TOLERANCE,
        mutates=None,
        inplace_results=None,
    )


class NoSolution(Exception):
    pass


def load_solution(path: Path) -> Callable[..., Any]:
    module = _import_file(SOLUTION_MODULE, path)
    fn = getattr(module, "solution", None)
    if not callable(fn):
        raise NoSolution("the file defines no callable `solution`")
    return fn


def load_target(target: dict) -> Callable[..., Any]:
    """What a player runs: {"kind": "file", "path"} (a submission), {"kind": "suite", "id"} (a
    suite problem's reference) or {"kind": "pkb", "root", "id"} (a public-suite reference)."""
    if target["kind"] == "file":
        return load_solution(Path(target["path"]))
    if target["kind"] == "suite":
        return tasks.load_reference(target["id"]).solution
    if target["kind"] == "pkb":
        root = Path(target["root"])
        if str(root) not in sys.path:
            sys.path.insert(0, str(root))
        return _import_file(f"pkb_reference_{target['id']}", pkb_reference_file(root, int(target["id"]))).solution
    raise ValueError(f"unknown target {target!r}")


def failure_kind(exc: BaseException) -> FailureKind:
    """compile_error for syntax errors and kernel build failures (load_inline, Triton); else runtime_error."""
    if isinstance(exc, (SyntaxError, NoSolution)):
        return FailureKind.COMPILE_ERROR
    kind = type(exc)
    if "CompilationError" in kind.__name__ or kind.__module__.startswith("triton.compiler"):
        return FailureKind.COMPILE_ERROR
    text = str(exc)
    if "Error building extension" in text or "Error compiling objects for extension" in text:
        return FailureKind.COMPILE_ERROR
    if isinstance(exc, ImportError) and "undefined symbol" in text:  # a built extension that cannot link
        return FailureKind.COMPILE_ERROR
    return FailureKind.RUNTIME_ERROR
