"""Django settings. Everything that differs between machines comes from the environment (PKB_*).

With no environment at all this is a working development site on SQLite (var/pkb.sqlite3) with
DEBUG on; PKB_ENV=production refuses to start with DEBUG on or the development secret key.
"""

import os
from pathlib import Path
from urllib.parse import parse_qsl, unquote, urlsplit

from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parents[2]  # the repository root
DEV_SECRET_KEY = "development-only-secret-key-never-use-in-production"


def env(name: str, default: str = "") -> str:
    return os.environ.get(name, default)


def envbool(name: str, default: str = "False") -> bool:
    return env(name, default).strip().lower() in ("1", "true", "yes", "on")


def envint(name: str, default: int) -> int:
    return int(env(name, str(default)))


def envlist(name: str, default: str = "") -> list[str]:
    return [item.strip() for item in env(name, default).split(",") if item.strip()]


def database_from_url(url: str) -> dict:
    """postgres://user:password@host:port/name?option=value -> a Django DATABASES entry."""
    if not url:
        (BASE_DIR / "var").mkdir(exist_ok=True)
        return {"ENGINE": "django.db.backends.sqlite3", "NAME": BASE_DIR / "var" / "pkb.sqlite3"}
    parts = urlsplit(url)
    if parts.scheme not in ("postgres", "postgresql"):
        raise ImproperlyConfigured(f"PKB_DATABASE_URL: unsupported scheme {parts.scheme!r} (use postgres://)")
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": unquote(parts.path.lstrip("/")) or "pkb",
        "USER": unquote(parts.username or ""),
        "PASSWORD": unquote(parts.password or ""),
        "HOST": parts.hostname or "",
        "PORT": str(parts.port or ""),
        "CONN_MAX_AGE": envint("PKB_DB_CONN_MAX_AGE", 60),
        "CONN_HEALTH_CHECKS": True,
        "OPTIONS": dict(parse_qsl(parts.query)),
    }


PKB_ENV = env("PKB_ENV", "development")
DEBUG = envbool("PKB_DEBUG", "False" if PKB_ENV == "production" else "True")
SECRET_KEY = env("PKB_SECRET_KEY", DEV_SECRET_KEY)
ALLOWED_HOSTS = envlist("PKB_ALLOWED_HOSTS", "localhost,127.0.0.1,[::1],testserver")
CSRF_TRUSTED_ORIGINS = envlist("PKB_CSRF_TRUSTED_ORIGINS")
SITE_NAME = env("PKB_SITE_NAME", "ParallelKernelBench")

if PKB_ENV == "production":
    if DEBUG:
        raise ImproperlyConfigured("PKB_ENV=production refuses PKB_DEBUG on")
    if SECRET_KEY == DEV_SECRET_KEY or len(SECRET_KEY) < 32:
        raise ImproperlyConfigured("PKB_ENV=production needs PKB_SECRET_KEY (at least 32 characters)")
    SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = envbool("PKB_SECURE_COOKIES", "True")
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SECURE_CONTENT_TYPE_NOSNIFF = True

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "django_htmx",
    "ninja",
    "accounts",
    "submissions",
    "catalog",
    "leaderboards",
    "casestudies",
    "api",
    "dispatch",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
]

ROOT_URLCONF = "pkb_site.urls"
WSGI_APPLICATION = "pkb_site.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "pkb_site.context_processors.site",
            ],
        },
    },
]

DATABASES = {"default": database_from_url(env("PKB_DATABASE_URL"))}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# Cached aggregates are keyed by the database's results version (leaderboards/cache.py), so any cache
# is safe; Redis (PKB_CACHE_URL=redis://...) shares them between processes.
CACHES = {
    "default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": env("PKB_CACHE_URL")}
    if env("PKB_CACHE_URL")
    else {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "OPTIONS": {"MAX_ENTRIES": 2000}}
}

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "catalog"
LOGOUT_REDIRECT_URL = "catalog"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "staticfiles"
STATICFILES_DIRS = [BASE_DIR / "static"]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"
        if DEBUG
        else "whitenoise.storage.CompressedManifestStaticFilesStorage"
    },
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env("PKB_LOG_LEVEL", "INFO")},
}

# The platform's own knobs.
PKB_MAX_CODE_BYTES = envint("PKB_MAX_CODE_BYTES", 256 * 1024)
PKB_SUBMISSIONS_PER_HOUR = envint("PKB_SUBMISSIONS_PER_HOUR", 120)
PKB_LEADERS_PER_PROBLEM = envint("PKB_LEADERS_PER_PROBLEM", 5)  # queued on new hardware
PKB_DEFAULT_HARDWARE = env("PKB_DEFAULT_HARDWARE", "cpu")
PKB_RESULTS_CACHE_S = envint("PKB_RESULTS_CACHE_S", 3600)

from pkb_site.celery_config import *  # noqa: E402,F403
