"""Attacks on the machine around the judge: the evaluating process's secrets, other submissions'
builds, the platform's database, the network, the host's memory."""

from __future__ import annotations

import errno
import re
import secrets
import shutil
import socket
import tempfile
import threading
from pathlib import Path

import pytest

from evaluator import disk_use
from evaluator.isolation import TMPFS_ENV


@pytest.mark.parametrize("variant", ["environ", "mem", "cmdline"])
def test_the_evaluators_secrets_stay_out_of_reach(adv, variant, monkeypatch):
    secret = secrets.token_hex(16)
    monkeypatch.setenv("PKB_ATTACK_SECRET", secret)
    doc = adv.judge("allreduce", "read_secrets", variant=variant)
    adv.assert_secret_absent(doc, secret)
    adv.assert_not_correct(doc)  # it returns the right sum only when it found the secret


def test_other_submissions_builds_cannot_be_overwritten(adv, tmp_path):
    builds = tmp_path / "builds"
    victim = builds / "victim" / "marker.so"
    victim.parent.mkdir(parents=True)
    content = secrets.token_bytes(64)
    victim.write_bytes(content)
    doc = adv.judge("allreduce", "overwrite_builds", build_dir=str(builds))
    assert victim.read_bytes() == content, f"another submission's build was overwritten: {adv.summary(doc)}"


def test_the_platforms_data_cannot_be_read_or_modified(adv, tmp_path):
    token = secrets.token_hex(16)
    content = b"SQLite format 3\x00" + f"PKB-PLATFORM-SECRET-{token}".encode()
    name = f"pkb-attack-marker-{token[:12]}.sqlite3"
    in_temp = tmp_path / name
    in_temp.write_bytes(content)
    var = adv.REPO_ROOT / "var"
    created_var = not var.exists()
    var.mkdir(exist_ok=True)
    in_repo = var / name
    assert not in_repo.exists()
    in_repo.write_bytes(content)
    try:
        with open(in_temp, "rb"):  # held open, as the web app holds its database
            doc = adv.judge("allreduce", "tamper_platform_data")
        assert in_temp.read_bytes() == content, "the database in the temporary directory was modified"
        assert in_repo.read_bytes() == content, "the database under var/ was modified"
        adv.assert_secret_absent(doc, f"PKB-PLATFORM-SECRET-{token}")
    finally:
        in_repo.unlink(missing_ok=True)
        if created_var:
            try:
                var.rmdir()
            except OSError:
                pass


def test_other_users_code_cannot_be_read(adv, tmp_path):
    """Another evaluation's working directory in the host's temporary directory, and another
    submission's sources in the shared build root, both hold a planted secret."""
    secret = f"PKB-OTHER-USERS-CODE-{secrets.token_hex(8)}"
    beside = Path(tempfile.mkdtemp(prefix="pkb-eval-")) / "submission" / "solution.py"
    beside.parent.mkdir()
    beside.write_text(f"# {secret}\n")
    builds = tmp_path / "builds"
    other = builds / "0123456789abcdef01234567" / "torch_extensions" / "victim" / "victim.cu"
    other.parent.mkdir(parents=True)
    other.write_text(f"// {secret}\n")
    try:
        doc = adv.judge("allreduce", "read_other_code", build_dir=str(builds))
    finally:
        shutil.rmtree(beside.parent.parent, ignore_errors=True)
    adv.assert_secret_absent(doc, secret)
    adv.assert_not_correct(doc)  # it returns the right sum only when it read a planted file


class _Server:
    """A TCP server on 127.0.0.1 that counts the connections it accepts."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(0.1)
        self.port = self.sock.getsockname()[1]
        self.connections = 0
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self.stopping.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.connections += 1
            conn.close()

    def close(self) -> None:
        self.stopping.set()
        self.thread.join(5)
        self.sock.close()


def test_the_network_is_out_of_reach(adv):
    server = _Server()
    try:
        doc = adv.judge("allreduce", "reach_network", params={"PORT": server.port})
    finally:
        server.close()
    assert server.connections == 0, f"{server.connections} connection(s) reached the test's server: {adv.summary(doc)}"


TMPFS_MIB = 256


def test_the_sandboxs_tmpfs_cannot_take_more_of_the_hosts_memory_than_its_limit(adv, monkeypatch, request):
    """Files in the sandbox's /tmp and /dev/shm are memory no process owns (the OOM killer frees
    none of it): each mount is capped, and the solution's write beyond it fails with ENOSPC."""
    request.getfixturevalue("sandboxed")  # unsandboxed, /tmp is the host's own
    monkeypatch.setenv(TMPFS_ENV, str(TMPFS_MIB))
    doc = adv.judge_appended("allreduce", "host_memory", variant="tmpfs")
    filled = {d: (int(n), int(e)) for d, n, e in re.findall(r"PKB-ATTACK-TMPFS (\S+) (\d+) (-?\d+)", doc["log_tail"])}
    assert set(filled) == {"/tmp", "/dev/shm"}, adv.summary(doc)
    for directory, (written, error) in filled.items():
        assert written <= TMPFS_MIB << 20 and error == errno.ENOSPC, f"{directory}: {written} bytes, errno {error}"
    assert doc["status"] == "correct", adv.summary(doc)  # the solution goes on, honestly, after the failed write


CAP_SYS_RESOURCE = 24


def holds_cap_sys_resource() -> bool:
    effective = next(line for line in Path("/proc/self/status").read_text().splitlines() if line.startswith("CapEff:"))
    return bool(int(effective.split()[1], 16) >> CAP_SYS_RESOURCE & 1)


def test_a_solution_is_the_first_the_oom_killer_ends(adv, request):
    """Its players start at the highest OOM score. Where the evaluator holds CAP_SYS_RESOURCE (a
    root worker), the sandbox's init sets that score as the floor too, and the solution cannot
    lower it; elsewhere the kernel lets it return to the floor it inherited (docs/sandbox.md)."""
    request.getfixturevalue("sandboxed")
    doc = adv.judge_appended("allreduce", "host_memory", variant="oom_score")
    assert "PKB-ATTACK-OOM-SCORE-ADJ 1000" in doc["log_tail"], adv.summary(doc)
    if holds_cap_sys_resource():
        assert "PKB-ATTACK-OOM-LOWERED False 1000" in doc["log_tail"], adv.summary(doc)
    assert doc["status"] == "correct", adv.summary(doc)


@pytest.mark.parametrize("variant", ["bytes", "entries"])
def test_a_solution_cannot_fill_the_hosts_disk_through_its_build_directory(adv, variant, monkeypatch, tmp_path):
    """The build directory is kept between evaluations of the same code: one grown past its limit
    (PKB_BUILD_DIR_MIB, or disk_use.MAX_ENTRIES entries) is the solution's rejection, and is deleted."""
    monkeypatch.setenv(disk_use.LIMIT_ENV, "64")
    builds = tmp_path / "builds"
    doc = adv.judge_appended("allreduce", "fill_build_dir", variant=variant, build_dir=str(builds))
    assert doc["status"] == "rejected" and "build directory" in doc["reason"], adv.summary(doc)
    kept = [d.name for d in builds.iterdir() if d.name != "reference"]
    assert kept == [], f"the solution's build directory was kept: {kept}"
