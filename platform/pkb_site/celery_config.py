"""Celery and dispatch settings, read from the environment; star-imported at the end of settings.py.

Broker: PKB_BROKER_URL (amqp://... in production, redis://... supported); empty means the embedded
default, kombu's filesystem transport under PKB_BROKER_DIR (var/broker), which needs no server.
No result backend: results come back as tasks on the web queue and are stored on our own rows.

Time limits, from the inside out (each must exceed the one before):
  PKB_EVAL_TIMEOUT_S        the evaluator kills an evaluation's rank processes after this long
  soft limit = timeout + PKB_EVAL_SLACK_S / 2     the GPU task reports an infrastructure failure
  hard limit = timeout + PKB_EVAL_SLACK_S         Celery kills the GPU task's pool process
  PKB_CONSUMER_TIMEOUT_S    RabbitMQ's consumer timeout (x-consumer-timeout) and Redis's visibility
                            timeout: an unacknowledged evaluation is not handed out again before it
"""

from __future__ import annotations

import os
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

from evaluator.launch import CPU_DEFAULTS
from evaluator.results import Mode
from evaluator.worker import (
    broker_url,
    common_settings,
    consumer_timeout_s,
    declare_queue,
    default_broker_dir,
    web_queue_name,
)


def _number(name: str, default: float) -> float:
    value = os.environ.get(name, "").strip()
    return float(value) if value else default


def _optional_int(name: str, default: int | None) -> int | None:
    value = os.environ.get(name, "").strip()
    return int(value) if value else default


PKB_BROKER_URL = broker_url()
PKB_BROKER_DIR = default_broker_dir()

# How evaluations run. The cpu mode proves the pipeline, not speed: the evaluator's CPU_DEFAULTS
# (few iterations; unless PKB_CPU_EVAL_SHAPES=all, the default shape only).
PKB_EVAL_TIMEOUT_S = _number("PKB_EVAL_TIMEOUT_S", 900.0)
PKB_EVAL_SLACK_S = _number("PKB_EVAL_SLACK_S", 120.0)
PKB_EVAL_SETTINGS = {
    Mode.GPU.value: {
        "warmup": _optional_int("PKB_EVAL_WARMUP", None),
        "iters": _optional_int("PKB_EVAL_ITERS", None),
        "trials": _optional_int("PKB_EVAL_TRIALS", None),
        "shapes": "all",
    },
    Mode.CPU.value: {
        "warmup": _optional_int("PKB_CPU_EVAL_WARMUP", CPU_DEFAULTS["warmup"]),
        "iters": _optional_int("PKB_CPU_EVAL_ITERS", CPU_DEFAULTS["iters"]),
        "trials": _optional_int("PKB_CPU_EVAL_TRIALS", CPU_DEFAULTS["trials"]),
        "shapes": os.environ.get("PKB_CPU_EVAL_SHAPES", "").strip() or CPU_DEFAULTS["shapes"],
    },
}
PKB_EVAL_SETTINGS[Mode.SHARED_GPU.value] = PKB_EVAL_SETTINGS[Mode.CPU.value] | {"shapes": "all"}

# Fault tolerance.
PKB_MAX_ATTEMPTS = int(_number("PKB_MAX_ATTEMPTS", 3))  # deliveries that started, before "failed"
PKB_HEARTBEAT_S = _number("PKB_HEARTBEAT_S", 30.0)  # GPU workers' heartbeat period
# A running evaluation whose worker has been silent this long is presumed lost.
PKB_LEASE_S = _number("PKB_LEASE_S", max(300.0, 10 * PKB_HEARTBEAT_S))
PKB_REAP_INTERVAL_S = _number("PKB_REAP_INTERVAL_S", 60.0)
PKB_RETRY_BACKOFF_S = _number("PKB_RETRY_BACKOFF_S", 15.0)  # times the attempt number, before a retry
PKB_UNPUBLISHED_AFTER_S = _number("PKB_UNPUBLISHED_AFTER_S", 60.0)  # queued, never published: publish again
PKB_CONSUMER_TIMEOUT_S = consumer_timeout_s()

PKB_EVAL_SOFT_LIMIT_S = PKB_EVAL_TIMEOUT_S + PKB_EVAL_SLACK_S / 2
PKB_EVAL_HARD_LIMIT_S = PKB_EVAL_TIMEOUT_S + PKB_EVAL_SLACK_S
if PKB_EVAL_SLACK_S <= 0 or PKB_CONSUMER_TIMEOUT_S <= PKB_EVAL_HARD_LIMIT_S + PKB_RETRY_BACKOFF_S * PKB_MAX_ATTEMPTS:
    raise ImproperlyConfigured(
        f"PKB_CONSUMER_TIMEOUT_S ({PKB_CONSUMER_TIMEOUT_S:g}) must exceed the hard time limit "
        f"PKB_EVAL_TIMEOUT_S + PKB_EVAL_SLACK_S ({PKB_EVAL_HARD_LIMIT_S:g}) plus retry back-off, and the slack must be positive"
    )
if PKB_LEASE_S <= 2 * PKB_HEARTBEAT_S:
    raise ImproperlyConfigured("PKB_LEASE_S must exceed two heartbeat periods (PKB_HEARTBEAT_S)")

_COMMON = common_settings(PKB_BROKER_URL, Path(PKB_BROKER_DIR))
CELERY_BROKER_URL = _COMMON["broker_url"]
CELERY_BROKER_TRANSPORT_OPTIONS = _COMMON["broker_transport_options"]
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = _COMMON["broker_connection_retry_on_startup"]
CELERY_BROKER_CONNECTION_MAX_RETRIES = _COMMON["broker_connection_max_retries"]
CELERY_TASK_SERIALIZER = _COMMON["task_serializer"]
CELERY_ACCEPT_CONTENT = _COMMON["accept_content"]
CELERY_TASK_IGNORE_RESULT = _COMMON["task_ignore_result"]
CELERY_RESULT_BACKEND = _COMMON["result_backend"]
CELERY_TASK_ACKS_LATE = _COMMON["task_acks_late"]
CELERY_TASK_REJECT_ON_WORKER_LOST = _COMMON["task_reject_on_worker_lost"]
CELERY_TASK_DEFAULT_EXCHANGE = _COMMON["task_default_exchange"]
CELERY_TASK_DEFAULT_EXCHANGE_TYPE = _COMMON["task_default_exchange_type"]
CELERY_TASK_DEFAULT_QUEUE = _COMMON["task_default_queue"]
CELERY_TASK_DEFAULT_ROUTING_KEY = _COMMON["task_default_routing_key"]
CELERY_WORKER_PREFETCH_MULTIPLIER = _COMMON["worker_prefetch_multiplier"]
CELERY_WORKER_CANCEL_LONG_RUNNING_TASKS_ON_CONNECTION_LOSS = _COMMON[
    "worker_cancel_long_running_tasks_on_connection_loss"
]
CELERY_WORKER_ENABLE_REMOTE_CONTROL = _COMMON["worker_enable_remote_control"]
CELERY_ENABLE_UTC = _COMMON["enable_utc"]
CELERY_TIMEZONE = "UTC"
# The web side's worker consumes the web queue only; GPU queues are declared when published to.
PKB_WEB_QUEUE = web_queue_name()
CELERY_TASK_QUEUES = [declare_queue(PKB_WEB_QUEUE)]
# Web-side tasks are short database updates; a stuck one is killed rather than left holding a worker.
CELERY_TASK_SOFT_TIME_LIMIT = 60
CELERY_TASK_TIME_LIMIT = 90
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
CELERY_BEAT_SCHEDULE = {
    # Expires after one period: a scheduler that ran while no web worker did leaves no pile behind.
    "reap-evaluations": {
        "task": "dispatch.tasks.reap",
        "schedule": PKB_REAP_INTERVAL_S,
        "options": {"expires": PKB_REAP_INTERVAL_S},
    },
}
CELERY_BEAT_SCHEDULE_FILENAME = os.environ.get("PKB_BEAT_SCHEDULE", "") or str(
    Path(__file__).resolve().parents[2] / "var" / "celerybeat-schedule"
)

__all__ = [name for name in dict(globals()) if name.startswith(("CELERY_", "PKB_"))]
