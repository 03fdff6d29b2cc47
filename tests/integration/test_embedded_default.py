"""The README's first command, `bin/serve`, on a fresh copy of the repository with no services:
it brings up the web app and its workers on SQLite and the filesystem broker, a submission made
through the browser's form completes, and Ctrl-C leaves no process behind."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests
from pkb_stack import CORRECT_SOLUTION, FAST_SETTINGS, REPO, csrf_token, free_port, submission_finished, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

NOT_COPIED = (".venv", "var", ".git", "__pycache__", "staticfiles", "*.egg-info", "test-artifacts", ".pytest_cache")


def fresh_copy(tmp_path: Path) -> Path:
    """The working tree as a clone would have it, using this interpreter's environment as its .venv.
    The install step is marked done for this pyproject.toml: this environment already has the extras,
    and installing would need the network."""
    root = tmp_path / "clone"
    shutil.copytree(REPO, root, ignore=shutil.ignore_patterns(*NOT_COPIED), symlinks=True)
    (root / ".venv").symlink_to(Path(sys.prefix))
    (root / "var").mkdir()
    digest = hashlib.sha256((root / "pyproject.toml").read_bytes()).hexdigest()
    (root / "var" / "installed").write_text(f"{digest} cpu,web,worker\n")  # bin/install's stamp
    return root


def processes_under(root: Path) -> list[str]:
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if str(root) in cmdline:
            found.append(f"{pid}: {cmdline}")
    return found


def test_bin_serve_runs_the_embedded_default_end_to_end(tmp_path):
    first_block = re.search(r"```(?:bash|sh)?\n(.*?)```", (REPO / "README.md").read_text(), re.S).group(1)
    assert first_block.split()[0] == "bin/serve", "the README's first command is what this test runs"
    root = fresh_copy(tmp_path)
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PKB_", "DJANGO_", "PYTEST_", "PYTHONPATH"))}
    env.update(FAST_SETTINGS)
    out_path = tmp_path / "serve.out"
    with open(out_path, "wb") as out:
        serve = subprocess.Popen(
            [str(root / "bin" / "serve"), "--port", str(port)], cwd=root, env=env, stdout=out,
            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip
    try:
        text = wait_for(lambda: _serving(out_path, serve), 150, "bin/serve to start")
        password = re.search(r"user admin, password (\S+)", text).group(1)
        base = f"http://127.0.0.1:{port}"
        wait_for(lambda: _up(base), 60, "the web server")

        browser = requests.Session()
        login = browser.get(base + "/accounts/login/")
        browser.post(
            base + "/accounts/login/",
            data={"username": "admin", "password": password, "csrfmiddlewaretoken": csrf_token(login.text)},
            headers={"Referer": base},
        )
        form = browser.get(base + "/submit/")
        posted = browser.post(base + "/submit/", headers={"Referer": base}, data={
            "csrfmiddlewaretoken": csrf_token(form.text), "problem": "allreduce", "model_tag": "human",
            "backend": "pytorch", "hardware": "cpu", "code": CORRECT_SOLUTION, "sample_index": "0",
        })  # fmt: skip
        submission = int(re.search(r"/submissions/(\d+)/", posted.url).group(1))
        done = wait_for(lambda: submission_finished(browser, base, submission), 120, "the evaluation", interval=0.5)
        (evaluation,) = done["evaluations"]
        assert (evaluation["hardware"], evaluation["state"], evaluation["status"]) == ("cpu", "done", "correct")
        assert (root / "var" / "pkb.sqlite3").exists() and (root / "var" / "broker" / "queue").is_dir()
    finally:
        os.kill(serve.pid, signal.SIGINT)  # Ctrl-C
        try:
            serve.wait(timeout=40)
        finally:
            if serve.poll() is None:
                os.killpg(serve.pid, signal.SIGKILL)
    assert serve.returncode == 0, out_path.read_text()[-3000:]
    time.sleep(0.5)
    assert processes_under(root) == []


def _serving(out_path: Path, serve: subprocess.Popen) -> str | None:
    text = out_path.read_text(errors="replace")
    if serve.poll() is not None:
        raise AssertionError(f"bin/serve exited with {serve.returncode}:\n{text[-3000:]}")
    return text if "serving http://" in text else None


def _up(base: str) -> bool:
    try:
        return requests.get(base + "/accounts/login/", timeout=2).status_code == 200
    except requests.RequestException:
        return False
