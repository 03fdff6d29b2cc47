"""Per-user API tokens. Only a SHA-256 of the secret is stored; the secret is shown once."""

from __future__ import annotations

import hashlib
import secrets

from django.conf import settings
from django.db import models
from django.utils import timezone

TOKEN_PREFIX = "pkb_"


def hash_token(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()


class ApiTokenManager(models.Manager):
    def issue(self, user, name: str = "") -> tuple["ApiToken", str]:
        raw = TOKEN_PREFIX + secrets.token_urlsafe(32)
        token = self.create(user=user, name=name or "token", key_hash=hash_token(raw), hint=raw[-4:])
        return token, raw

    def authenticate(self, raw: str):
        """The token's user, or None. Touches last_used_at at most once a minute."""
        if not raw or not raw.startswith(TOKEN_PREFIX):
            return None
        token = self.select_related("user").filter(key_hash=hash_token(raw), user__is_active=True).first()
        if token is None:
            return None
        now = timezone.now()
        if token.last_used_at is None or (now - token.last_used_at).total_seconds() > 60:
            type(token).objects.filter(pk=token.pk).update(last_used_at=now)
        return token.user


class ApiToken(models.Model):
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100)
    key_hash = models.CharField(max_length=64, unique=True)
    hint = models.CharField(max_length=4, help_text="last four characters, to tell tokens apart")
    created_at = models.DateTimeField(default=timezone.now)
    last_used_at = models.DateTimeField(null=True, blank=True)

    objects = ApiTokenManager()

    class Meta:
        ordering = ("-created_at",)

    def __str__(self) -> str:
        return f"{self.name} (…{self.hint})"


class Throttle(models.Model):
    """One counter of a rate limit (accounts/throttle.py): events of `scope` by `key` (an address,
    an account) in the fixed window that starts at `window`. In the database, so that every web
    process counts together, on SQLite as on PostgreSQL."""

    scope = models.CharField(max_length=20)
    key = models.CharField(max_length=100)
    window = models.BigIntegerField(help_text="window start, Unix seconds")
    count = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["scope", "key", "window"], name="throttle_counter")]
        indexes = [models.Index(fields=["window"], name="throttle_window")]

    def __str__(self) -> str:
        return f"{self.scope} {self.key}: {self.count} since {self.window}"
