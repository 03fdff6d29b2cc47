"""Which evaluation workers serve which hardware, from their presence messages (evaluator.worker's
Presence: one when a worker is ready, then one every PKB_PRESENCE_S, busy or idle, and "offline"
when it stops). GPU hosts never reach the database: the web-side worker writes these rows."""

from __future__ import annotations

from datetime import timedelta

from django.db import models
from django.utils import timezone


class WorkerPresence(models.Model):
    name = models.CharField(max_length=200, unique=True, help_text="the worker's node name")
    hardware = models.CharField(max_length=50, db_index=True, help_text="slug of the hardware whose queue it serves")
    online = models.BooleanField(default=True, help_text="False once it said it stops")
    interval_s = models.FloatField(default=30.0, help_text="its announcement period")
    first_seen = models.DateTimeField(default=timezone.now)
    last_seen = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ("hardware", "name")
        verbose_name = "worker"

    def __str__(self) -> str:
        return f"{self.name} ({self.hardware})"

    # Announcements missed before a worker is presumed gone (killed, host down, network cut).
    MISSED = 3
    MIN_GRACE_S = 10.0

    def alive(self, now=None) -> bool:
        now = now or timezone.now()
        grace = max(self.MISSED * self.interval_s, self.MIN_GRACE_S)
        return self.online and self.last_seen >= now - timedelta(seconds=grace)
