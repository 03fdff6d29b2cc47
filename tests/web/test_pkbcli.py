import ast
import importlib.metadata
import json
import re
import sys
import threading
import time
import tomllib
from pathlib import Path

import pytest
from django.db import connection
from rich.console import Console

from pkbcli.cli import main, outputs_text, plan, print_results, progress_table
from pkbcli.naming import RunDirectory, parse_run_directory, parse_solution_file

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        (
            "solutions_cuda_bf16_h100_8_together_zai-org_GLM-5.1",
            RunDirectory("cuda", "bf16", "h100_8", "together", "zai-org_GLM-5.1"),
        ),
        ("solutions_triton_fp32_none_openai_gpt-5.5", RunDirectory("triton", "fp32", "none", "openai", "gpt-5.5")),
        (
            "solutions_cuda_bf16_b200_72_google_gemini-3-pro-preview",
            RunDirectory("cuda", "bf16", "b200_72", "google", "gemini-3-pro-preview"),
        ),
        ("solutions_cuda_bf16_h200_acme_model", RunDirectory("cuda", "bf16", "h200", "acme", "model")),
        ("solutions_cuda", None),
        ("results_cuda_bf16_h100_8_together_x", None),
    ],
)
def test_run_directory_names(name, expected):
    assert parse_run_directory(name) == expected


def test_solution_file_names():
    parsed = parse_solution_file(Path("38_ulysses_gather_seq_scatter_heads_qkv_parallelkittens.py"))
    assert (parsed.pkb_id, parsed.name, parsed.backend) == (38, "ulysses_gather_seq_scatter_heads_qkv", "cuda")
    assert parse_solution_file(Path("2_allgather_triton.py")).backend == "triton"
    assert parse_solution_file(Path("notes.py")) is None


def test_plan_maps_files_to_problems(tmp_path):
    run = tmp_path / "solutions_cuda_bf16_h100_8_openai_gpt-5.5"
    run.mkdir()
    for name in ("1_allreduce_cuda.py", "2_renamed_cuda.py", "99_unknown_cuda.py", "helper.py"):
        (run / name).write_text("def solution(): pass\n")
    problems = [{"slug": "allreduce", "pkb_id": 1}, {"slug": "allgather", "pkb_id": 2}]
    planned, skipped = plan([tmp_path], problems, model=None, backend=None, problem=None)
    assert [(p.path.name, p.problem, p.model_tag, p.backend) for p in planned] == [
        ("1_allreduce_cuda.py", "allreduce", "gpt-5.5", "cuda"),
        ("2_renamed_cuda.py", "allgather", "gpt-5.5", "cuda"),
    ]
    assert len(skipped) == 2
    single = tmp_path / "mine.py"
    single.write_text("def solution(): pass\n")
    planned, skipped = plan([single], problems, model="human", backend="pytorch", problem="allreduce")
    assert [(p.problem, p.model_tag, p.backend) for p in planned] == [("allreduce", "human", "pytorch")]
    assert plan([single], problems, model=None, backend=None, problem="allreduce")[1]  # no model tag


def test_outputs_across_hardware_in_the_table():
    evaluations = [{"hardware": hw, "state": "done", "status": "correct", "speedup": 1.0} for hw in ("cpu", "h200")]
    sub = {"id": 7, "problem": "repro_linear", "model_tag": "m", "evaluations": evaluations}
    same = dict(sub, outputs={"hardware": 2, "identical": True, "groups": [["cpu", "h200"]]})
    differ = dict(sub, outputs={"hardware": 2, "identical": False, "groups": [["cpu"], ["h200"]]})
    assert outputs_text(same) == "identical on 2 hardware" and outputs_text(differ) == "differ: cpu | h200"
    assert outputs_text(sub) == "" and outputs_text(dict(sub, outputs={"hardware": 1, "identical": None})) == ""
    console = Console(width=80, record=True)
    console.print(progress_table([differ, dict(same, id=8)]))
    text = console.export_text()
    assert "#7 outputs differ: cpu | h200" in text and "#8 outputs identical on 2 hardware" in text


@pytest.mark.django_db(transaction=True)
def test_submits_a_directory_and_waits_for_results(
    live_server, tmp_path, capsys, user, problem, other_problem, cpu, worker, make_result
):
    from accounts.models import ApiToken
    from submissions.models import Evaluation

    _, token = ApiToken.objects.issue(user)
    run = tmp_path / "solutions_cuda_bf16_h100_8_together_zai-org_GLM-5.1"
    run.mkdir()
    (run / "1_allreduce_cuda.py").write_text("import torch\n\ndef solution(t):\n    return t\n")
    (run / "2_allgather_cuda.py").write_text("def solution(:\n")  # rejected by the server

    def finish_later():  # the worker double picks the evaluation up once the client is waiting
        deadline = time.monotonic() + 20
        try:
            while time.monotonic() < deadline:
                ev = Evaluation.objects.filter(state="queued", dispatch_token__isnull=False).first()
                if ev:
                    time.sleep(0.5)
                    worker.stage(ev, "starting")
                    time.sleep(0.3)
                    worker.finish(ev, make_result(ev, speedups=(2, 2, 2)))
                    return
                time.sleep(0.1)
        finally:
            connection.close()  # this thread's own connection

    thread = threading.Thread(target=finish_later)
    thread.start()
    code = main(
        ["--url", live_server.url, "--token", token, "submit", str(tmp_path), "--poll", "0.2", "--timeout", "20"]
    )
    thread.join()
    out = capsys.readouterr().out
    assert "submitted" in out and "refused" in out and "syntax error on line 1" in out
    assert "correct" in out and "2.00x" in out
    assert code == 1  # one file was rejected
    ev = Evaluation.objects.get()
    assert ev.submission.model_tag == "zai-org_GLM-5.1" and ev.state == "done"


@pytest.mark.django_db(transaction=True)
def test_bad_token(live_server, tmp_path, capsys, problem, cpu):
    f = tmp_path / "x.py"
    f.write_text("def solution(): pass\n")
    code = main(
        [
            "--url",
            live_server.url,
            "--token",
            "pkb_nope",
            "submit",
            str(f),
            "--problem",
            "allreduce",
            "--model",
            "human",
            "--no-wait",
        ]
    )
    assert code == 2 and "HTTP 401" in capsys.readouterr().out


def test_runs_on_the_core_dependencies_alone():
    """bin/serve, the README and a GPU host install different extras; pkbcli must work with any of
    them: every third-party module it imports comes from a core dependency."""
    core = {
        re.split(r"[<>=!~\[; ]", requirement, maxsplit=1)[0].lower().replace("_", "-")
        for requirement in tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    }
    distributions = importlib.metadata.packages_distributions()
    imported = set()
    for source in (REPO / "platform" / "pkbcli").glob("*.py"):
        for node in ast.walk(ast.parse(source.read_text())):
            if isinstance(node, ast.Import):
                imported |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                imported.add(node.module.split(".")[0])
    third_party = imported - set(sys.stdlib_module_names) - {"pkbcli"}
    assert third_party >= {"requests", "rich"}
    for module in third_party:
        provided = {d.lower().replace("_", "-") for d in distributions.get(module, [])}
        assert provided & core, f"pkbcli imports {module}, which no core dependency of pyproject.toml provides"


def test_the_table_says_when_no_worker_serves_a_queue():
    evaluations = [
        {"hardware": "h200x4", "state": "queued", "queue_position": 2, "workers": []},
        {"hardware": "cpu", "state": "queued", "queue_position": 1, "workers": ["gpu-cpu@host"]},
    ]
    console = Console(width=120, record=True)
    console.print(progress_table([{"id": 3, "problem": "allreduce", "model_tag": "m", "evaluations": evaluations}]))
    text = console.export_text()
    assert "queued #2, no worker" in text and "queued #1 " in text


def test_the_table_is_complete():
    reason = " ".join(f"word{i}" for i in range(60))  # far wider than the terminal
    evaluations = [{"hardware": "cpu", "state": "done", "status": "incorrect", "speedup": None, "reason": reason}]
    console = Console(width=80, record=True)
    print_results(console, [{"id": 3, "problem": "allreduce", "model_tag": "m", "evaluations": evaluations}])
    text = console.export_text()
    assert "…" not in text and "incorrect" in text and " ".join(text.split()).endswith(reason)


def test_usage_and_connection_errors_exit_2(tmp_path, capsys):
    assert main(["--url", "http://127.0.0.1:9", "status", "1"]) == 2
    assert "cannot reach http://127.0.0.1:9" in capsys.readouterr().out
    assert main(["--url", "http://127.0.0.1:9", "submit", str(tmp_path / "missing.py"), "--model", "m"]) == 2
    assert "no such file or directory" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exited:
        main(["submit"])
    assert exited.value.code == 2


@pytest.mark.django_db(transaction=True)
def test_exit_codes_and_json_follow_the_results(live_server, capsys, user, problem, cpu, judged, submit):
    correct = judged(user, problem, cpu).submission_id
    incorrect = judged(user, problem, cpu, status="incorrect", model_tag="other").submission_id
    queued = submit(user, problem, cpu, model_tag="third").pk

    def status(*ids, json_output=True):
        code = main(["--url", live_server.url, "status", *map(str, ids), *(["--json"] if json_output else [])])
        return code, capsys.readouterr()

    code, out = status(correct)
    document = json.loads(out.out)
    assert code == 0 and document["exit_code"] == 0 and document["counts"] == {"correct": 1, "failed": 0, "pending": 0}
    [sub] = document["submissions"]
    assert sub["id"] == correct and sub["evaluations"][0]["status"] == "correct" and "code" not in sub

    code, out = status(correct, incorrect, queued)
    document = json.loads(out.out)
    assert code == 1 and document["counts"] == {"correct": 1, "failed": 1, "pending": 1}

    code, out = status(correct, queued)
    assert code == 3 and json.loads(out.out)["counts"]["pending"] == 1

    code, out = status(correct, incorrect, json_output=False)
    assert code == 1 and "incorrect" in out.out and "1 correct, 1 failed" in out.out


@pytest.mark.django_db(transaction=True)
def test_submit_waits_then_exits_0_only_if_all_are_correct(
    live_server, tmp_path, capsys, user, problem, cpu, worker, make_result
):
    from accounts.models import ApiToken
    from submissions.models import Evaluation

    _, token = ApiToken.objects.issue(user)
    solution = tmp_path / "mine.py"
    solution.write_text("import torch\n\ndef solution(t):\n    return t\n")

    def finish_later():  # the first evaluation comes out correct, the second incorrect
        deadline = time.monotonic() + 20
        try:
            for status in ("correct", "incorrect"):
                while not (ev := Evaluation.objects.filter(state="queued", dispatch_token__isnull=False).first()):
                    assert time.monotonic() < deadline
                    time.sleep(0.1)
                worker.finish(ev, make_result(ev, status=status))
        finally:
            connection.close()

    thread = threading.Thread(target=finish_later)
    thread.start()
    args = ["--url", live_server.url, "--token", token, "submit", str(solution), "--problem", "allreduce"]
    args += ["--model", "human", "--poll", "0.2", "--timeout", "20", "--json"]
    first = main(args)
    first_out = json.loads(capsys.readouterr().out)
    second = main(args)
    second_out = json.loads(capsys.readouterr().out)
    thread.join()
    assert (first, first_out["counts"]["correct"]) == (0, 1)
    assert (second, second_out["counts"]["failed"]) == (1, 1)
    assert second_out["submissions"][0]["evaluations"][0]["status"] == "incorrect"
