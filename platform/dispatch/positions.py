"""Queue positions and backlogs, read from the rows (the broker's own counters cannot say where one
message stands, and the web side may not even reach the broker)."""

from __future__ import annotations

from django.db.models import Q

from submissions.models import Evaluation


def backlog(hardware) -> int:
    hardware_id = getattr(hardware, "pk", hardware)
    return Evaluation.objects.filter(hardware_id=hardware_id, state="queued").count()


def queue_position(evaluation) -> int | None:
    if evaluation.state != "queued":
        return None
    # Queues are first in, first out: ahead are those queued earlier on the same hardware.
    ahead = Evaluation.objects.filter(hardware_id=evaluation.hardware_id, state="queued").filter(
        Q(queued_at__lt=evaluation.queued_at) | Q(queued_at=evaluation.queued_at, pk__lt=evaluation.pk)
    )
    return ahead.count() + 1
