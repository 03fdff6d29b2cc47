"""The evaluator's diagnostics stay out of a submitter's reach: the batch order that times the pairs
in another order, the batch length that sizes them otherwise, and the stopwatch that runs code
without a sandbox (evaluator/stopwatch.py).
(The L2 flush diagnostic has its own test beside its attack, test_timing_attacks.py.)"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from evaluator.launch import EvaluationRequest
from evaluator.results import BatchOrder

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("setting, asked, judges", [
    ("batch_order", BatchOrder.REFERENCE_WARM, BatchOrder.SYMMETRIC),
    ("batch_target_ms", 1.0, 0.0),
])
def test_a_payload_asking_for_a_diagnostic_timing_is_timed_the_judges_way(setting, asked, judges):
    """A worker builds its request from the broker's payload: a diagnostic in the payload's
    settings must not reach the judge (only the symmetric order times both sides alike, and a
    batch length of the submitter's choosing would let it trade the protocol's weight against
    the host's noise)."""
    Job = pytest.importorskip("evaluator.worker", reason="the worker's dependencies are not installed").Job
    job = Job.from_payload({
        "evaluation": 1, "token": "t", "problem": "allreduce", "code": "", "world_size": 2, "mode": "gpu",
        "profile": None, "settings": {setting: asked, "iters": 8},
    })  # fmt: skip
    kwargs = job.request_kwargs()
    assert setting not in kwargs and kwargs["iters"] == 8
    assert getattr(EvaluationRequest(**kwargs), setting) == judges


def importers_of(module: str, folders: list[str]) -> list[str]:
    found = []
    for folder in folders:
        for path in sorted((ROOT / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                names = []
                if isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.module:
                    names = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
                if module in names:
                    found.append(str(path.relative_to(ROOT)))
    return found


def test_nothing_that_judges_submissions_can_reach_the_unsandboxed_stopwatch():
    """The stopwatch runs the source it is given in plain processes: fed a submission, it would run
    hostile code outside every sandbox. Only tests and benchmarks may import it."""
    assert (ROOT / "evaluator" / "stopwatch.py").exists()  # else this test proves nothing
    importers = [p for p in importers_of("evaluator.stopwatch", ["evaluator", "platform"]) if not p.endswith("stopwatch.py")]
    assert not importers, importers
    assert importers_of("evaluator.stopwatch", ["bench"])  # the search finds an importer where there is one
