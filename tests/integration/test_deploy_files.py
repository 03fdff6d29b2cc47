"""The deployment files agree with the code: every setting the code reads is documented in
deploy/.env.example, and the compose file runs the services the platform needs."""

from __future__ import annotations

import re

from pkb_stack import REPO

SETTING_READ = re.compile(
    r"""(?:environ(?:\.get)?|getenv|env\w*|_number|_optional_int)\(\s*["'](PKB_[A-Z0-9_]+)["']|environ\[["'](PKB_[A-Z0-9_]+)["']"""
)


def settings_read_by_the_code() -> set[str]:
    names = set()
    for folder in ("platform", "evaluator", "deploy"):
        for path in (REPO / folder).rglob("*.py"):
            for match in SETTING_READ.finditer(path.read_text()):
                names.add(match.group(1) or match.group(2))
    return names


def test_every_setting_is_documented_in_the_environment_example():
    documented = set(re.findall(r"^#? ?(PKB_[A-Z0-9_]+)=", (REPO / "deploy" / ".env.example").read_text(), re.M))
    used = settings_read_by_the_code()
    assert {"PKB_SECRET_KEY", "PKB_DATABASE_URL", "PKB_BROKER_URL", "PKB_HARDWARE"} <= used
    assert used - documented == set()


def test_compose_runs_web_database_broker_worker_and_scheduler():
    compose = (REPO / "deploy" / "docker-compose.yml").read_text()
    services = set(re.findall(r"^  ([a-z]+):\n", compose.split("\nservices:\n", 1)[1].split("\nvolumes:\n")[0], re.M))
    assert {"web", "postgres", "rabbitmq", "worker", "beat"} <= services
    assert 'celery", "-A", "pkb_site", "beat"' in compose and "gunicorn.conf.py" in compose
    unit = (REPO / "deploy" / "pkb-gpu-worker@.service").read_text()
    assert (
        "CUDA_VISIBLE_DEVICES" in unit and "PKB_HARDWARE" in unit and "PKB_DATABASE_URL" not in unit.split("[Unit]")[1]
    )
