import subprocess
import sys
from pathlib import Path

import pytest

from pkb_site.settings import database_from_url

ROOT = Path(__file__).resolve().parents[2]


def test_database_url_parsing():
    db = database_from_url("postgres://pkb:s%40cret@db.example:5433/pkb_prod?sslmode=require")
    assert (db["ENGINE"], db["NAME"], db["USER"], db["PASSWORD"], db["HOST"], db["PORT"]) == (
        "django.db.backends.postgresql",
        "pkb_prod",
        "pkb",
        "s@cret",
        "db.example",
        "5433",
    )
    assert db["OPTIONS"] == {"sslmode": "require"}
    assert database_from_url("")["ENGINE"] == "django.db.backends.sqlite3"
    with pytest.raises(Exception, match="unsupported scheme"):
        database_from_url("mysql://x/y")


def load_settings(env: dict) -> subprocess.CompletedProcess:
    code = "import pkb_site.settings as s; print(s.DEBUG, s.DATABASES['default']['ENGINE'])"
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": f"{ROOT}/platform:{ROOT}", **env},
    )


def test_production_refuses_debug_and_the_default_secret():
    refused = load_settings({"PKB_ENV": "production", "PKB_DEBUG": "1", "PKB_SECRET_KEY": "x" * 50})
    assert refused.returncode != 0 and "refuses PKB_DEBUG" in refused.stderr
    refused = load_settings({"PKB_ENV": "production"})
    assert refused.returncode != 0 and "needs PKB_SECRET_KEY" in refused.stderr
    ok = load_settings({"PKB_ENV": "production", "PKB_SECRET_KEY": "x" * 50, "PKB_DATABASE_URL": "postgres://u@h/db"})
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.split() == ["False", "django.db.backends.postgresql"]
