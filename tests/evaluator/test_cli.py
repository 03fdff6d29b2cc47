"""`python -m evaluator`: exit codes tell a failed solution from a broken evaluator."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from evaluator.results import Result

ROOT = Path(__file__).resolve().parents[2]
SOLUTIONS = Path(__file__).parent / "solutions"


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "evaluator", *args], cwd=ROOT, capture_output=True, text=True, timeout=300)


def written(path: Path) -> dict:
    """The document the CLI wrote: valid, and written back unchanged by the model."""
    doc = json.loads(path.read_text())
    assert Result.from_dict(doc).to_dict() == doc
    return doc


def run_args(solution: Path, tmp_path: Path) -> list[str]:
    return ["run", "--problem", "allgather", "--solution", str(solution), "--world-size", "2", "--shape", "small",
            "--warmup", "2", "--iters", "4", "--trials", "2", "--quiet", "--json", str(tmp_path / "result.json")]


def test_correct_solution_exits_0_and_writes_the_document(tmp_path):
    out = cli(*run_args(ROOT / "tasks" / "allgather" / "reference.py", tmp_path))
    assert out.returncode == 0, out.stdout + out.stderr
    assert "correct" in out.stdout and "timings NOT meaningful" in out.stdout
    doc = written(tmp_path / "result.json")
    assert doc["status"] == "correct" and doc["problem"] == "allgather"


def test_failed_solution_exits_1(tmp_path):
    out = cli(*run_args(SOLUTIONS / "allgather_off_by_one.py", tmp_path))
    assert out.returncode == 1
    assert "incorrect" in out.stdout and "rank 1" in out.stdout


def test_cpu_mode_defaults_to_the_default_shape_and_few_calls(tmp_path):
    import tasks
    from evaluator.launch import CPU_DEFAULTS

    out = cli("run", "--problem", "allgather", "--solution", str(ROOT / "tasks" / "allgather" / "reference.py"),
              "--json", str(tmp_path / "result.json"))  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    default = tasks.get("allgather").default_shape.name
    assert f"cpu mode: shape {default} only" in out.stdout
    doc = written(tmp_path / "result.json")
    assert [s["name"] for s in doc["shapes"]] == [default]
    assert {k: doc["settings"][k] for k in ("warmup", "iters", "trials")} == {
        k: CPU_DEFAULTS[k] for k in ("warmup", "iters", "trials")
    }


def test_usage_errors_exit_2(tmp_path):
    assert cli("run", "--problem", "no_such_problem", "--solution", str(SOLUTIONS / "zeros.py")).returncode == 2
    assert cli("run", "--problem", "allgather", "--solution", str(tmp_path / "missing.py")).returncode == 2
    assert cli("run", "--problem", "allgather", "--solution", str(SOLUTIONS / "zeros.py"), "--world-size", "3").returncode == 2


def test_problems_lists_the_suite():
    out = cli("problems", "--json")
    assert out.returncode == 0
    problems = {p["id"]: p for p in json.loads(out.stdout)}
    assert problems["allgather"]["bitwise"] is True and problems["allreduce"]["pkb_id"] == 1
    table = cli("problems", "--markdown").stdout
    assert "| allreduce | 1 | 1 | collective |" in table


def test_broken_host_exits_3(tmp_path):
    import torch

    if torch.cuda.is_available():
        return  # this host can run gpu mode; the failure cannot be provoked here
    args = run_args(ROOT / "tasks" / "allgather" / "reference.py", tmp_path) + ["--mode", "gpu"]
    out = cli(*args)
    assert out.returncode == 3
    assert "gpu mode needs" in out.stdout


def test_unsandboxed_is_the_command_lines_choice_and_said_in_the_result(tmp_path):
    out = cli(*run_args(ROOT / "tasks" / "allgather" / "reference.py", tmp_path), "--unsandboxed")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "judged without the sandbox" in out.stdout
    doc = written(tmp_path / "result.json")
    assert doc["environment"]["sandboxed"] is False
    out = cli(*run_args(ROOT / "tasks" / "allgather" / "reference.py", tmp_path))
    assert json.loads((tmp_path / "result.json").read_text())["environment"]["sandboxed"] is True
    assert "judged without the sandbox" not in out.stdout


def test_the_summary_says_which_shapes_timed_calls_went_to_the_device():
    import copy

    from rich.console import Console

    from evaluator.cli import print_summary
    from tests.evaluator.test_results import CPU_DOC

    doc = copy.deepcopy(CPU_DOC)
    doc["shapes"][0]["timing_run"]["allocator"] = {
        "reference": {"device_allocs": [0, 0], "device_frees": [0, 0], "retries": [0, 0]},
        "solution": {"device_allocs": [2, 2], "device_frees": [1, 2], "retries": [0, 0]}}
    console = Console(record=True, width=400)
    print_summary(Result.from_dict(doc), console)
    assert ("small: During the timed calls, the solution's CUDA allocator took memory from the device 4 times, gave it "
            "back 3 times and retried 0 times") in console.export_text()
    console = Console(record=True, width=400)
    print_summary(Result.from_dict(CPU_DOC), console)  # no record (the CPU): nothing said
    assert "allocator" not in console.export_text()
