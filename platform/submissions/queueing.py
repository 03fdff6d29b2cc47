"""The web side's only contact with the dispatch app: publish after commit, read queue positions."""

from __future__ import annotations

import importlib

from django.db import transaction


def _dispatch_function(name: str):
    """dispatch.<name>, or None while the dispatch app is absent (e.g. a web-only checkout)."""
    try:
        module = importlib.import_module("dispatch")
    except ImportError:
        return None
    return getattr(module, name, None)


def enqueue_on_commit(evaluation_ids: list[int]) -> None:
    """Publish each evaluation once the transaction that created its row has committed."""
    ids = list(evaluation_ids)

    def publish() -> None:
        enqueue = _dispatch_function("enqueue")
        if enqueue is None:  # rows stay queued; nothing can run them without the dispatch app
            raise RuntimeError("dispatch.enqueue is missing: evaluations were stored but cannot be queued")
        for evaluation_id in ids:
            enqueue(evaluation_id)

    if ids:
        transaction.on_commit(publish)


def queue_position(evaluation) -> int | None:
    """1-based position in its hardware's queue, or None once it left the queue."""
    if evaluation.state != "queued":
        return None
    position = _dispatch_function("queue_position")
    return position(evaluation) if position else None


def backlog(hardware) -> int | None:
    count = _dispatch_function("backlog")
    return count(hardware) if count else None


def workers(hardware) -> list | None:
    """The workers serving this hardware's queue now (each with .name, .last_seen, .running), or
    None while the dispatch app is absent."""
    serving = _dispatch_function("workers")
    return serving(hardware) if serving else None
