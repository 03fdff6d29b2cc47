"""Whether anything serves a hardware's queue: the workers' presence rows, and, for workers that
do not announce themselves (older ones), evaluations of that hardware they are running with a
heartbeat within the lease."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from dispatch.models import WorkerPresence
from submissions.models import Evaluation


@dataclass(frozen=True)
class ServingWorker:
    name: str
    last_seen: object  # datetime
    running: int | None  # the evaluation it is running, if any


def record(name: str, hardware: str, online: bool, interval_s: float) -> None:
    now = timezone.now()
    updated = WorkerPresence.objects.filter(name=name[:200]).update(
        hardware=hardware[:50], online=online, interval_s=interval_s, last_seen=now
    )
    if not updated and online:
        WorkerPresence.objects.get_or_create(
            name=name[:200],
            defaults={"hardware": hardware[:50], "interval_s": interval_s, "first_seen": now, "last_seen": now},
        )


def serving(hardware) -> list[ServingWorker]:
    """The workers serving this hardware's queue now, by name."""
    slug = getattr(hardware, "slug", hardware)
    hardware_id = getattr(hardware, "pk", None)
    now = timezone.now()
    seen = {p.name: p.last_seen for p in WorkerPresence.objects.filter(hardware=slug) if p.alive(now)}
    running = Evaluation.objects.filter(state="running").exclude(worker="")
    running = running.filter(hardware_id=hardware_id) if hardware_id else running.filter(hardware__slug=slug)
    busy = {}
    lease_cut = now - timedelta(seconds=settings.PKB_LEASE_S)
    for ev_id, worker, heartbeat in running.values_list("pk", "worker", "heartbeat_at"):
        busy[worker] = ev_id
        if worker not in seen and heartbeat and heartbeat >= lease_cut:
            seen[worker] = heartbeat
    return [ServingWorker(name, seen[name], busy.get(name)) for name in sorted(seen)]
