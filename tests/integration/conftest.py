"""Fixtures for the dispatch tests.

Tests marked `services` run real processes against the machine's PostgreSQL, RabbitMQ and Redis
(skipped, saying which, when one is unreachable). Each test gets its own database (cloned from a
migrated template), its own web queue and hardware slugs, and kills every process it started.
The others test the dispatch logic in-process on PostgreSQL, with publishing recorded.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import uuid
from pathlib import Path

import pkb_stack
import pytest
from django.conf import settings

from pkb_site.settings import database_from_url

TEST_DATABASE_URL = "postgres://postgres@127.0.0.1:5432/pkb_web"

# Settings were loaded before this file; point the (not yet opened) connection at PostgreSQL.
if settings.DATABASES["default"]["ENGINE"] != "django.db.backends.postgresql":
    settings.DATABASES["default"].update(database_from_url(os.environ.get("PKB_DATABASE_URL") or TEST_DATABASE_URL))


def require(url: str, port: int, what: str) -> None:
    if not pkb_stack.reachable(url, port):
        pytest.skip(f"{what} is not reachable at {url.split('@')[-1]}")


@pytest.fixture(scope="session")
def pg_template(tmp_path_factory):
    require(pkb_stack.PG_ADMIN_URL, 5432, "PostgreSQL")
    name = f"pkb_it_template_{os.getpid()}"
    pkb_stack.create_template(name, tmp_path_factory.mktemp("template"))
    yield name
    pkb_stack.drop_database(name)


@pytest.fixture
def make_stack(pg_template, tmp_path):
    """make_stack(broker_url, **settings) -> a Stack on a fresh database; closed after the test."""
    stacks: list[pkb_stack.Stack] = []

    def make(broker_url: str, **settings_: str) -> pkb_stack.Stack:
        database = pkb_stack.clone_database(pg_template)
        stack = pkb_stack.Stack(
            tmp_path / f"stack{len(stacks)}", broker_url, database, {k: str(v) for k, v in settings_.items()}
        )
        stacks.append(stack)
        return stack

    yield make
    for stack in stacks:
        stack.close()
        pkb_stack.drop_database(stack.database)
        stack.remove_queues()


@pytest.fixture
def rabbitmq():
    require(pkb_stack.RABBITMQ_URL, 5672, "RabbitMQ")
    return pkb_stack.RABBITMQ_URL


@pytest.fixture
def redis_broker():
    require(pkb_stack.REDIS_URL, 6379, "Redis")
    return pkb_stack.REDIS_URL


class PrivateRabbit:
    """A RabbitMQ node of our own (the machine's installation, its own port and data directory),
    so a test can kill and restart the broker without disturbing anyone else's."""

    def __init__(self, root: Path):
        self.root = root
        self.port = pkb_stack.free_port()
        self.dist_port = pkb_stack.free_port()
        self.node = f"pkbtest{uuid.uuid4().hex[:6]}@localhost"
        self.url = f"amqp://guest:guest@127.0.0.1:{self.port}//"
        self.popen: subprocess.Popen | None = None
        (root / "rabbitmq.conf").write_text(
            f"listeners.tcp.default = 127.0.0.1:{self.port}\nconsumer_timeout = 7200000\n"
        )
        (root / "enabled_plugins").write_text("[].\n")

    def start(self, timeout: float = 60) -> None:
        env = {
            **os.environ,
            "RABBITMQ_NODENAME": self.node,
            "RABBITMQ_NODE_IP_ADDRESS": "127.0.0.1",
            "RABBITMQ_NODE_PORT": str(self.port),
            "RABBITMQ_DIST_PORT": str(self.dist_port),
            "RABBITMQ_MNESIA_BASE": str(self.root / "mnesia"),
            "RABBITMQ_LOG_BASE": str(self.root / "log"),
            "RABBITMQ_CONFIG_FILE": str(self.root / "rabbitmq"),
            "RABBITMQ_ENABLED_PLUGINS_FILE": str(self.root / "enabled_plugins"),
            "HOME": str(self.root),
        }
        with open(self.root / "server.log", "ab") as log:
            self.popen = subprocess.Popen(
                [self.server_binary()],
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        pkb_stack.wait_for(
            lambda: pkb_stack.reachable(self.url, self.port) or self.popen.poll() is not None,
            timeout,
            "the private RabbitMQ node to listen",
        )
        assert self.popen.poll() is None, (self.root / "server.log").read_text()[-3000:]

    def kill(self) -> None:
        """SIGKILL, as in a crash: only what the broker had confirmed to publishers may survive."""
        if self.popen is not None:
            os.killpg(self.popen.pid, signal.SIGKILL)
            self.popen.wait(timeout=10)
            self.popen = None

    @staticmethod
    def server_binary() -> str:
        for candidate in ("/usr/lib/rabbitmq/bin/rabbitmq-server", shutil.which("rabbitmq-server") or ""):
            if candidate and os.access(candidate, os.X_OK):
                return candidate
        pytest.skip("rabbitmq-server is not installed: cannot run a private broker to restart")


@pytest.fixture
def private_rabbit(tmp_path_factory):
    rabbit = PrivateRabbit(tmp_path_factory.mktemp("rabbit"))
    rabbit.server_binary()
    rabbit.start()
    yield rabbit
    rabbit.kill()
