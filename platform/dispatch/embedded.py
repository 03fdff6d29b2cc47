"""The embedded default: the whole platform on one machine with no services. SQLite under var/,
kombu's filesystem broker under var/broker, and three processes started and stopped together:
the web server, the web-side worker (with the scheduler, for the reaper) and one evaluation
worker, in `cpu` mode, or `gpu` mode when nvidia-smi finds GPUs. `bin/serve` runs it.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings

from evaluator import sandbox
from evaluator.results import Mode

REPO = Path(settings.BASE_DIR)
PROFILES = (("H200", "h200"), ("H100", "h100"), ("B200", "b200"))


@dataclass(frozen=True)
class LocalHardware:
    slug: str
    profile: str
    gpu_count: int
    mode: str


def detect_gpus() -> list[str]:
    """GPU names from nvidia-smi, or [] without one."""
    if not shutil.which("nvidia-smi"):
        return []
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True, text=True, timeout=30
        )
    except (OSError, subprocess.TimeoutExpired):
        return []
    return [line.strip() for line in out.stdout.splitlines() if line.strip()] if out.returncode == 0 else []


def local_hardware(gpu_names: list[str]) -> LocalHardware:
    """Two CPU ranks without a GPU; one rank per GPU (gpu mode) with GPUs. The roofline profile
    comes from the first GPU's name (H100 numbers when it is none of the known ones)."""
    if not gpu_names:
        return LocalHardware("cpu", "h100", 2, Mode.CPU.value)
    profile = next((key for marker, key in PROFILES if marker in gpu_names[0].upper()), "h100")
    return LocalHardware(f"{profile}x{len(gpu_names)}", profile, len(gpu_names), Mode.GPU.value)


def ensure_hardware(hw: LocalHardware) -> bool:
    """Create the local hardware row unless it exists. Returns True if created."""
    from catalog.models import Hardware
    from catalog.sync import hardware_from_profile

    if Hardware.objects.filter(slug=hw.slug).exists():
        return False
    hardware_from_profile(hw.slug, hw.profile, hw.gpu_count, mode=hw.mode).save()
    return True


def ensure_admin() -> str | None:
    """Create an "admin" superuser if there is no superuser. Returns its password, shown once."""
    from django.contrib.auth import get_user_model

    users = get_user_model().objects
    if users.filter(is_superuser=True).exists():
        return None
    password = secrets.token_urlsafe(12)
    users.create_superuser("admin", "", password)
    return password


def commands(hw: LocalHardware, host: str, port: int) -> dict[str, list[str]]:
    python = sys.executable
    var = REPO / "var"
    return {
        "web": [
            python, "-m", "gunicorn", "-c", str(REPO / "deploy" / "gunicorn.conf.py"),
            "--bind", f"{host}:{port}", "--workers", "2", "pkb_site.wsgi:application",
        ],
        "web-worker": [
            python, "-m", "celery", "-A", "pkb_site", "worker", "-Q", settings.PKB_WEB_QUEUE, "--concurrency", "1",
            "--hostname", "web@%h", "--without-gossip", "--without-mingle", "--without-heartbeat",
            "--beat", "--schedule", str(var / "celerybeat-schedule"), "--loglevel", "INFO",
        ],
        "evaluation-worker": [python, "-m", "evaluator.worker", "--hardware", hw.slug],
    }  # fmt: skip


class Supervisor:
    """Starts the processes, each in its own session, and stops them together: on Ctrl-C, on
    SIGTERM, or as soon as one of them exits."""

    def __init__(self, commands: dict[str, list[str]], env: dict[str, str], log_dir: Path):
        self.commands, self.env, self.log_dir = commands, env, log_dir
        self.procs: dict[str, subprocess.Popen] = {}
        self.stopping = False

    def start(self) -> None:
        # Rank processes run in sessions of their own: orphaned by a killed worker, they come back
        # to us, and stop() finds them.
        sandbox.become_subreaper()
        self.baseline = sandbox.descendants([os.getpid()])
        self.log_dir.mkdir(parents=True, exist_ok=True)
        for name, argv in self.commands.items():
            with open(self.log_dir / f"{name}.log", "ab") as log:
                self.procs[name] = subprocess.Popen(
                    argv, cwd=REPO, env=self.env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                    start_new_session=True,
                )  # fmt: skip

    def wait(self) -> int:
        def request_stop(signum, frame):
            self.stopping = True

        signal.signal(signal.SIGINT, request_stop)
        signal.signal(signal.SIGTERM, request_stop)
        exited = None
        while not self.stopping and exited is None:
            exited = next((name for name, p in self.procs.items() if p.poll() is not None), None)
            time.sleep(0.2)
        self.stop()
        if exited:
            print(f"{exited} exited with code {self.procs[exited].returncode}; see {self.log_dir}/{exited}.log")
            return 1
        return 0

    def stop(self, grace_s: float = 15.0) -> None:
        for p in self.procs.values():
            _signal_group(p, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        for p in self.procs.values():
            try:
                p.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        for p in self.procs.values():
            _signal_group(p, signal.SIGKILL)  # a worker still busy, and anything its group left behind
            p.wait()
        for pid in sandbox.descendants([os.getpid()]) - self.baseline:
            try:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
            except (ProcessLookupError, ChildProcessError):
                pass


def _signal_group(p: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(p.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def child_environment(hw: LocalHardware) -> dict[str, str]:
    env = dict(os.environ)
    path = [str(REPO), str(REPO / "platform")] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])
    env.update(PYTHONPATH=os.pathsep.join(path), PYTHONUNBUFFERED="1", PKB_DEFAULT_HARDWARE=hw.slug)
    return env
