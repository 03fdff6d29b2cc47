"""bin/install, which bin/serve and bin/test run: PyTorch's CPU index is probed for a few seconds
and left out when unreachable (pip would otherwise retry it for every package, minutes in all),
PKB_TORCH_INDEX chooses instead, and a second run with nothing new installs nothing. pip is
replaced by a recorder: these tests check what it is asked, not the network."""

from __future__ import annotations

import http.server
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BLACKHOLE = "http://10.255.255.1/whl/cpu"  # not routed: a connection waits until it times out


@pytest.fixture
def checkout(tmp_path):
    """bin/install and pyproject.toml in a folder of their own, with a .venv whose python runs
    everything but pip, which only records its arguments."""
    root = tmp_path / "checkout"
    (root / "bin").mkdir(parents=True)
    shutil.copy2(REPO / "bin" / "install", root / "bin" / "install")
    shutil.copy2(REPO / "pyproject.toml", root / "pyproject.toml")
    venv = root / ".venv" / "bin"
    venv.mkdir(parents=True)
    (venv / "python").write_text(
        "#!/bin/sh\n"
        'if [ "$1" = -m ] && [ "$2" = pip -o "$2" = compileall ]; then echo "$*" >> "$PIP_LOG"; exit 0; fi\n'
        f'exec {sys.executable} "$@"\n'
    )
    (venv / "python").chmod(0o755)
    return root


def install(root: Path, extras: str, *options: str, **env: str) -> tuple[str, list[str], float]:
    """Run bin/install without a GPU; returns its output, pip's recorded calls and the seconds it took."""
    log = root / "pip.log"
    path = ":".join(p for p in os.environ["PATH"].split(":") if not (Path(p) / "nvidia-smi").exists())
    environment = {k: v for k, v in os.environ.items() if not k.startswith("PKB_TORCH")}
    environment.update(PATH=path, PIP_LOG=str(log), **env)
    started = time.monotonic()
    done = subprocess.run(
        [str(root / "bin" / "install"), *options, extras], env=environment, capture_output=True, text=True, timeout=60
    )
    took = time.monotonic() - started
    assert done.returncode == 0, done.stdout + done.stderr
    if "--compile-later" in options:  # a detached job: give it a moment to start
        deadline = time.monotonic() + 10
        while "compileall" not in (log.read_text() if log.exists() else "") and time.monotonic() < deadline:
            time.sleep(0.05)
    calls = log.read_text().splitlines() if log.exists() else []
    log.unlink(missing_ok=True)
    return done.stdout, calls, took


def test_an_unreachable_cpu_index_is_given_up_after_the_probe(checkout):
    out, [call], took = install(checkout, "cpu,web,worker", PKB_TORCH_CPU_INDEX=BLACKHOLE, PKB_TORCH_INDEX_PROBE_S="2")
    assert "unreachable" in out and "--extra-index-url" not in call and took < 10
    assert "install --disable-pip-version-check -e .[cpu,web,worker]" in call


def test_a_reachable_cpu_index_is_used(checkout):
    class Index(http.server.BaseHTTPRequestHandler):
        def do_HEAD(self):
            self.send_response(200 if self.path == "/whl/cpu/torch/" else 404)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Index)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/whl/cpu"
    try:
        out, [call], _ = install(checkout, "cpu,web,worker", PKB_TORCH_CPU_INDEX=url)
    finally:
        server.shutdown()
    assert "reachable" in out and call.endswith(f"--extra-index-url {url}")


def test_the_environment_chooses_without_a_probe(checkout):
    out, [call], took = install(checkout, "cpu", PKB_TORCH_INDEX="off", PKB_TORCH_CPU_INDEX=BLACKHOLE)
    assert "PKB_TORCH_INDEX=off" in out and "--extra-index-url" not in call and took < 5
    (checkout / "pyproject.toml").write_text((checkout / "pyproject.toml").read_text() + "\n")  # changed
    _, [call], took = install(checkout, "cpu", PKB_TORCH_INDEX="https://mirror.example/whl/cpu")
    assert call.endswith("--extra-index-url https://mirror.example/whl/cpu") and took < 5


def test_installs_once_until_pyproject_or_the_extras_change(checkout):
    _, calls, _ = install(checkout, "cpu,web,worker", PKB_TORCH_INDEX="off")
    assert len(calls) == 1
    assert install(checkout, "cpu,web,worker", PKB_TORCH_INDEX="off")[1] == []
    assert install(checkout, "web", PKB_TORCH_INDEX="off")[1] == []  # already there
    _, [call], _ = install(checkout, "cpu,web,worker,test", PKB_TORCH_INDEX="off")  # bin/test after bin/serve
    assert "-e .[cpu,test,web,worker]" in call
    assert install(checkout, "cpu,web,worker", PKB_TORCH_INDEX="off")[1] == []
    (checkout / "pyproject.toml").write_text((checkout / "pyproject.toml").read_text() + "\n")
    _, [call], _ = install(checkout, "cpu,web,worker", PKB_TORCH_INDEX="off")
    assert "-e .[cpu,web,worker]" in call


def test_bin_serve_compiles_after_the_install_not_during_it(checkout):
    out, [call, compile_call], _ = install(checkout, "cpu,web,worker", "--compile-later", PKB_TORCH_INDEX="off")
    assert call.endswith("--no-compile") and compile_call.startswith("-m compileall -q -j 0 ")
    assert "byte-compiling the installed packages in the background" in out
    assert "--compile-later" in (REPO / "bin" / "serve").read_text()
    _, [call], _ = install(checkout, "cpu,web,worker,test", PKB_TORCH_INDEX="off")  # bin/test: as usual
    assert "--no-compile" not in call
