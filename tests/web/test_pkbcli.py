import threading
import time
from pathlib import Path

import pytest
from django.db import connection
from rich.console import Console

from pkbcli.cli import main, outputs_text, plan, progress_table
from pkbcli.naming import RunDirectory, parse_run_directory, parse_solution_file


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
    assert "submitted" in out and "rejected" in out and "syntax error on line 1" in out
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
