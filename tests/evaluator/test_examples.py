"""The example solutions the problem pages offer (examples/solutions/examples.toml): the index names
real files, problems, backends and modes, and each example that claims to run on the CPU is judged
correct there, which is what a newcomer's first submission on a machine without a GPU relies on."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

import tasks
from evaluator.launch import EvaluationRequest, evaluate
from evaluator.results import Mode

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "solutions"
INDEX = tomllib.loads((EXAMPLES / "examples.toml").read_text())["example"]
CPU_EXAMPLES = [e for e in INDEX if "cpu" in e["modes"]]
# What the platform runs in cpu mode (the default shape), with fewer timed calls.
FAST = {"warmup": 1, "iters": 3, "trials": 2, "shapes": ["default"], "timeout_s": 120, "timing_budget_s": 0}


def test_the_index_names_real_files_problems_backends_and_modes():
    for example in INDEX:
        assert (EXAMPLES / example["file"]).is_file(), example["file"]
        assert example["problem"] in tasks.problems(), example["problem"]
        assert example["backend"] in ("cuda", "triton", "pytorch")
        assert set(example["modes"]) <= {m.value for m in Mode}
    assert CPU_EXAMPLES, "a newcomer without a GPU needs an example that runs on the CPU"
    listed = {e["file"] for e in INDEX}
    assert {p.name for p in EXAMPLES.glob("*.py")} == listed, "every example file is listed in examples.toml"


@pytest.mark.slow
@pytest.mark.parametrize("example", CPU_EXAMPLES, ids=[e["file"] for e in CPU_EXAMPLES])
def test_cpu_examples_are_judged_correct_in_cpu_mode(example):
    request = EvaluationRequest(
        problem=example["problem"],
        solution_code=(EXAMPLES / example["file"]).read_text(),
        world_size=2,
        mode="cpu",
        **FAST,
    )
    doc = evaluate(request)
    assert doc["status"] == "correct", doc["reason"]
    assert all(shape["correct"] for shape in doc["shapes"])
