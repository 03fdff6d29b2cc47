"""Dispatch: from a queued Evaluation row to a GPU worker and back.

The web side calls `enqueue(evaluation_id)` once the row is committed, and reads `queue_position`,
`backlog` and `workers` for its pages and API. Everything else (the web-queue tasks that store results and
progress, the reaper) lives in the submodules. Importing this package loads no models, so it is
safe while Django is still starting.
"""

from __future__ import annotations


def enqueue(evaluation_id: int) -> None:
    """Publish a queued evaluation on its hardware's queue (`gpu.<hardware slug>`), once."""
    from dispatch.publish import enqueue as _enqueue

    _enqueue(evaluation_id)


def queue_position(evaluation) -> int | None:
    """1-based place of a queued evaluation in its hardware's queue; None once it left the queue."""
    from dispatch.positions import queue_position as _queue_position

    return _queue_position(evaluation)


def backlog(hardware) -> int:
    """How many evaluations wait in this hardware's queue."""
    from dispatch.positions import backlog as _backlog

    return _backlog(hardware)


def workers(hardware) -> list:
    """The workers serving this hardware's queue now (dispatch.presence.ServingWorker), by name."""
    from dispatch.presence import serving

    return serving(hardware)
