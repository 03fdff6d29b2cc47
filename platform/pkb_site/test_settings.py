"""Settings for the test suite: the real settings, on PostgreSQL (PKB_DATABASE_URL, else the local
server; pytest-django creates and drops its own test_<name> database)."""

import os

os.environ.setdefault("PKB_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/pkb")

from pkb_site.settings import *  # noqa: E402,F403

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]  # fast; tests only
STORAGES = {**STORAGES, "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"}}  # noqa: F405
WHITENOISE_AUTOREFRESH = True  # serve from the source folders: nothing is collected in tests
# Each test rolls its writes back, results version included: a shared cache would outlive them.
CACHES = {"default": {"BACKEND": "django.core.cache.backends.dummy.DummyCache"}}
