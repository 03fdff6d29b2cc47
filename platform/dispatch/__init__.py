"""Dispatch: from a queued Evaluation row to a GPU worker and back.

`publish` sends each evaluation the submissions app announces (its `evaluations_queued` signal,
connected in apps.py) to its hardware's queue; `positions` and `presence` tell the pages and the API
where a queued evaluation stands and which workers serve its hardware; `tasks` are the web queue's
tasks that store progress and results, and `reaper` retries what was lost.
"""
