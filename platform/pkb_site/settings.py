"""Django settings. Everything that differs between machines comes from the environment (PKB_*).

With no environment at all this is a working site on SQLite (var/pkb.sqlite3), safe to expose:
DEBUG is off unless PKB_DEBUG asks for it, and the secret key is generated once per install and
kept in var/secret_key (mode 0600, never in the repository) unless PKB_SECRET_KEY gives one.
PKB_ENV=production refuses to start with DEBUG on or without PKB_SECRET_KEY.
"""

import os
import secrets
from datetime import timedelta
from pathlib import Path
from urllib.parse import parse_qsl, unquote, urlsplit

from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parents[2]  # the repository root
# The key every checkout of earlier versions shared: refused wherever it is given.
PUBLIC_SECRET_KEY = "development-only-secret-key-never-use-in-production"


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


def install_secret_key(path: Path) -> str:
    """This install's secret key: read from `path`, or generated there on first use (mode 0600).
    Concurrent first starts (web workers, the web-side worker) agree: the file appears whole, once."""
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    draft = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_urlsafe(50) + "\n")
        os.link(draft, path)  # fails if another process got there first: theirs wins
    except FileExistsError:
        pass
    finally:
        draft.unlink(missing_ok=True)
    return path.read_text().strip()


PKB_ENV = env("PKB_ENV", "development")
DEBUG = envbool("PKB_DEBUG", "False")
SECRET_KEY = env("PKB_SECRET_KEY") or (
    "" if PKB_ENV == "production" else install_secret_key(BASE_DIR / "var" / "secret_key")
)
ALLOWED_HOSTS = envlist("PKB_ALLOWED_HOSTS", "localhost,127.0.0.1,[::1],testserver")
CSRF_TRUSTED_ORIGINS = envlist("PKB_CSRF_TRUSTED_ORIGINS")
SITE_NAME = env("PKB_SITE_NAME", "ParallelKernelBench")
if SECRET_KEY == PUBLIC_SECRET_KEY:
    raise ImproperlyConfigured(
        "PKB_SECRET_KEY is the public development key of earlier versions: unset it or choose another"
    )

if PKB_ENV == "production":
    if DEBUG:
        raise ImproperlyConfigured("PKB_ENV=production refuses PKB_DEBUG on")
    if len(SECRET_KEY) < 32:
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
    "axes",
    # The platform's apps in layer order (tests/web/test_app_direction.py): each imports only apps listed before it.
    "common",
    "catalog",
    "submissions",
    "accounts",
    "leaderboards",
    "casestudies",
    "dispatch",
    "pages",
    "api",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "common.middleware.ContentSecurityPolicyMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "common.middleware.HostileInputMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "axes.middleware.AxesMiddleware",  # last: turns a locked-out log-in into its page
]

# Scripts, styles, fonts and images come from the site itself, on every page (the admin's and the
# API's Swagger UI included): templates carry no inline script or style (JSON data blocks only), and
# htmx is told not to add its indicator <style> (base.html).
PKB_CSP = {
    "default-src": ("'self'",),
    "script-src": ("'self'",),
    "style-src": ("'self'",),
    "img-src": ("'self'", "data:"),
    "font-src": ("'self'",),
    "connect-src": ("'self'",),
    "object-src": ("'none'",),
    "base-uri": ("'none'",),
    "form-action": ("'self'",),
    "frame-ancestors": ("'none'",),
}

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
                "common.context_processors.site",
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
# Log-in attempts go through django-axes first: PKB_LOGIN_FAILURES failures in a row for an account
# or from an address lock both out for PKB_LOGIN_LOCKOUT_MINUTES (counted in the database, so every
# web process and the admin's log-in share them). Sign-up and API limits: accounts/throttle.py.
AUTHENTICATION_BACKENDS = ["axes.backends.AxesStandaloneBackend", "django.contrib.auth.backends.ModelBackend"]
PKB_LOGIN_FAILURES = envint("PKB_LOGIN_FAILURES", 10)
PKB_LOGIN_LOCKOUT_MINUTES = envint("PKB_LOGIN_LOCKOUT_MINUTES", 15)
PKB_SIGNUPS_PER_HOUR = envint("PKB_SIGNUPS_PER_HOUR", 10)
PKB_API_BAD_TOKENS_PER_HOUR = envint("PKB_API_BAD_TOKENS_PER_HOUR", 30)
PKB_API_REQUESTS_PER_MINUTE = envint("PKB_API_REQUESTS_PER_MINUTE", 600)
# Reverse proxies in front of the web server that append to X-Forwarded-For (0: clients connect directly).
PKB_TRUSTED_PROXIES = envint("PKB_TRUSTED_PROXIES", 0)
AXES_FAILURE_LIMIT = PKB_LOGIN_FAILURES
AXES_COOLOFF_TIME = timedelta(minutes=PKB_LOGIN_LOCKOUT_MINUTES)
AXES_LOCKOUT_PARAMETERS = ["ip_address", "username"]
AXES_RESET_ON_SUCCESS = True
AXES_DISABLE_ACCESS_LOG = True  # failures are what it needs; successful log-ins are not kept
AXES_CLIENT_IP_CALLABLE = "accounts.throttle.client_ip"
AXES_LOCKOUT_CALLABLE = "accounts.throttle.login_locked_out"
AXES_VERBOSE = False

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
# Production serves what collectstatic gathered (hashed names); elsewhere WhiteNoise serves the source
# folders as they are, DEBUG on or off, with nothing to collect first.
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"
        if PKB_ENV == "production"
        else "django.contrib.staticfiles.storage.StaticFilesStorage"
    },
}
WHITENOISE_USE_FINDERS = PKB_ENV != "production"

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
