"""The problem suite. One problem per folder `tasks/<id>/`: `problem.py` (pure metadata,
shapes, roofline: `PROBLEM`) and `reference.py` (torch: `make_inputs(ctx)` and `solution(*inputs)`).

`problems()` reads only the pure halves, so the web side can list problems without torch.
"""

from __future__ import annotations

import importlib
from functools import lru_cache
from pathlib import Path
from types import ModuleType

from tasks.spec import Problem

ROOT = Path(__file__).resolve().parent


@lru_cache(maxsize=1)
def problems() -> dict[str, Problem]:
    """Every problem of the suite by id, in (level, id) order."""
    found: list[Problem] = []
    for path in sorted(ROOT.glob("*/problem.py")):
        module = importlib.import_module(f"tasks.{path.parent.name}.problem")
        problem = module.PROBLEM
        if problem.id != path.parent.name:
            raise ValueError(f"{path}: PROBLEM.id {problem.id!r} must equal its folder name")
        found.append(problem)
    found.sort(key=lambda p: (p.level, p.pkb_id or 10_000, p.id))
    return {p.id: p for p in found}


def get(problem_id: str) -> Problem:
    try:
        return problems()[problem_id]
    except KeyError:
        raise KeyError(f"unknown problem {problem_id!r}; `python -m evaluator problems` lists them") from None


def reference_path(problem_id: str) -> Path:
    return ROOT / problem_id / "reference.py"


def reference_source(problem_id: str) -> str:
    return reference_path(problem_id).read_text()


def load_reference(problem_id: str) -> ModuleType:
    """Import a problem's torch half (imports torch)."""
    get(problem_id)
    return importlib.import_module(f"tasks.{problem_id}.reference")
