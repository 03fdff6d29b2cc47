"""Rate limits a person can understand: how many, over what time, and how long to wait.

- Log-in: django-axes (settings AXES_*), per address and per account, PKB_LOGIN_FAILURES failed
  attempts lock out for PKB_LOGIN_LOCKOUT_MINUTES; `login_locked_out` is the page it shows.
- Sign-up: PKB_SIGNUPS_PER_HOUR attempts per address.
- API tokens: PKB_API_BAD_TOKENS_PER_HOUR requests with an unknown token per address (after which
  no token is accepted from there until the hour is over), and PKB_API_REQUESTS_PER_MINUTE
  requests per account.

Counters live in the database (accounts.Throttle), in fixed windows, so every web process of the
embedded default (SQLite) or a deployment (PostgreSQL) counts together; no cache server needed.
"""

from __future__ import annotations

import ipaddress
import math
import random
import time
from dataclasses import dataclass

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F
from django.http import HttpRequest, HttpResponse
from django.template.loader import render_to_string

from accounts.models import Throttle


def _address(text: str) -> str | None:
    try:
        return str(ipaddress.ip_address(text.strip()))
    except ValueError:
        return None


def client_ip(request: HttpRequest) -> str | None:
    """The client's address: REMOTE_ADDR, or with PKB_TRUSTED_PROXIES reverse proxies in front, the
    address the outermost of them saw (X-Forwarded-For, counted from the right: the part a client
    cannot forge). None without one (a request made up in a test)."""
    proxies = settings.PKB_TRUSTED_PROXIES
    if proxies > 0:
        chain = [a for a in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",") if a.strip()]
        if len(chain) >= proxies and (seen := _address(chain[-proxies])):
            return seen
    return _address(request.META.get("REMOTE_ADDR") or "")


def client_key(request: HttpRequest) -> str:
    return client_ip(request) or "unknown"


def wait_text(seconds: float) -> str:
    """ "2 minutes", "40 seconds", "1 hour": how long to wait, rounded up."""
    seconds = max(1, math.ceil(seconds))
    if seconds < 90:
        return f"{seconds} second{'s' if seconds != 1 else ''}"
    minutes = math.ceil(seconds / 60)
    if minutes < 90:
        return f"{minutes} minutes"
    hours = math.ceil(minutes / 60)
    return f"{hours} hour{'s' if hours != 1 else ''}"


@dataclass(frozen=True)
class Limit:
    scope: str
    limit: int
    window_s: int

    def _window(self) -> tuple[int, float]:
        now = time.time()
        return int(now // self.window_s * self.window_s), now

    def count(self, key: str) -> None:
        """One more event by `key`."""
        window, _ = self._window()
        row = Throttle.objects.filter(scope=self.scope, key=key[:100], window=window)
        with transaction.atomic():
            if not row.update(count=F("count") + 1):
                try:
                    with transaction.atomic():
                        Throttle.objects.create(scope=self.scope, key=key[:100], window=window, count=1)
                except IntegrityError:  # created meanwhile by another request
                    row.update(count=F("count") + 1)
        if random.random() < 0.01:  # now and then, forget windows long over
            Throttle.objects.filter(window__lt=window - 86_400).delete()

    def _used(self, key: str) -> tuple[int, float]:
        """(events in the current window, seconds until it ends)."""
        window, now = self._window()
        used = Throttle.objects.filter(scope=self.scope, key=key[:100], window=window).values_list("count", flat=True)
        return used.first() or 0, window + self.window_s - now

    def wait(self, key: str) -> float | None:
        """Seconds until `key` may go on, if it has used up the limit; else None."""
        used, left = self._used(key)
        return left if used >= self.limit else None

    def hit(self, key: str) -> float | None:
        """Count one event; the seconds to wait if it went over the limit, else None."""
        self.count(key)
        used, left = self._used(key)
        return left if used > self.limit else None


def signups() -> Limit:
    return Limit("signup", settings.PKB_SIGNUPS_PER_HOUR, 3600)


def bad_tokens() -> Limit:
    return Limit("api-bad-token", settings.PKB_API_BAD_TOKENS_PER_HOUR, 3600)


def api_requests() -> Limit:
    return Limit("api-account", settings.PKB_API_REQUESTS_PER_MINUTE, 60)


class Throttled(Exception):
    def __init__(self, message: str, retry_after_s: float):
        super().__init__(message)
        self.retry_after_s = max(1, math.ceil(retry_after_s))


def too_many(request: HttpRequest, message: str, retry_after_s: float) -> HttpResponse:
    """The page of a refusal: 429, what happened and how long to wait, and Retry-After."""
    html = render_to_string("error.html", {"status": 429, "detail": message}, request=request)
    response = HttpResponse(html, status=429)
    response["Retry-After"] = str(max(1, math.ceil(retry_after_s)))
    return response


def login_locked_out(request: HttpRequest, original_response=None, credentials=None) -> HttpResponse:
    """django-axes' lockout response (AXES_LOCKOUT_CALLABLE). A failed attempt during a lockout
    starts the cool-off again, so the wait is the whole cool-off from now."""
    minutes = settings.PKB_LOGIN_LOCKOUT_MINUTES
    message = (
        f"Too many failed log-ins for this account or from your address ({settings.PKB_LOGIN_FAILURES} in a row). "
        f"Log-in is locked for {wait_text(minutes * 60)}: try again after that. "
        "Each further attempt before then starts the wait again."
    )
    return too_many(request, message, minutes * 60)
