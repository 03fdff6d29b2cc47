import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from django.contrib.messages import constants
from django.contrib.messages.storage.cookie import CookieStorage
from django.test import override_settings

from pkb_site.settings import PUBLIC_SECRET_KEY, database_from_url, install_secret_key

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


def load_settings(env: dict, root: Path = ROOT, code: str = "") -> subprocess.CompletedProcess:
    code = code or "import pkb_site.settings as s; print(s.DEBUG, s.DATABASES['default']['ENGINE'])"
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=root,
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": f"{root}/platform:{ROOT}", **env},
    )


def install_copy(tmp_path: Path) -> Path:
    """The settings package alone in a folder of its own: an install whose var/ starts empty."""
    shutil.copytree(ROOT / "platform" / "pkb_site", tmp_path / "platform" / "pkb_site")
    return tmp_path


def test_the_default_install_has_debug_off_and_a_secret_key_of_its_own(tmp_path):
    root = install_copy(tmp_path)
    code = "import pkb_site.settings as s; print(s.DEBUG, s.SECRET_KEY)"
    first = load_settings({}, root, code)
    assert first.returncode == 0, first.stderr
    debug, key = first.stdout.split()
    assert debug == "False"  # no URL list on a 404, no traceback on a 500
    assert len(key) >= 50 and key != PUBLIC_SECRET_KEY
    key_file = root / "var" / "secret_key"
    assert key_file.read_text().strip() == key
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert load_settings({}, root, code).stdout.split() == ["False", key]  # kept: sessions survive a restart
    assert load_settings({"PKB_DEBUG": "1"}, root, code).stdout.split()[0] == "True"  # only when asked for
    other = install_copy(tmp_path / "other")
    assert load_settings({}, other, code).stdout.split()[1] != key  # per install
    refused = load_settings({"PKB_SECRET_KEY": PUBLIC_SECRET_KEY}, root, code)
    assert refused.returncode != 0 and "public development key" in refused.stderr


def test_secret_key_file_is_created_once(tmp_path):
    path = tmp_path / "var" / "secret_key"
    key = install_secret_key(path)
    assert install_secret_key(path) == key
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert [p.name for p in path.parent.iterdir()] == ["secret_key"]  # no draft left behind


@pytest.mark.django_db
def test_a_messages_cookie_signed_with_the_public_key_is_ignored(client):
    """Anyone could sign cookies with the key every earlier checkout shared."""
    with override_settings(SECRET_KEY=PUBLIC_SECRET_KEY):
        storage = CookieStorage(type("Request", (), {"COOKIES": {}})())
        forged = storage._encode([storage_message("Your account was suspended: log in at evil.example")])
    client.cookies["messages"] = forged
    assert "evil.example" not in client.get("/").content.decode()


def storage_message(text):
    from django.contrib.messages.storage.base import Message

    return Message(constants.ERROR, text)


def test_production_refuses_debug_and_the_default_secret():
    refused = load_settings({"PKB_ENV": "production", "PKB_DEBUG": "1", "PKB_SECRET_KEY": "x" * 50})
    assert refused.returncode != 0 and "refuses PKB_DEBUG" in refused.stderr
    refused = load_settings({"PKB_ENV": "production"})
    assert refused.returncode != 0 and "needs PKB_SECRET_KEY" in refused.stderr
    ok = load_settings({"PKB_ENV": "production", "PKB_SECRET_KEY": "x" * 50, "PKB_DATABASE_URL": "postgres://u@h/db"})
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.split() == ["False", "django.db.backends.postgresql"]
