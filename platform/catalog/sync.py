"""Copy the problem suite (`tasks/`) into the database, and create hardware rows. Idempotent:
running it twice changes nothing the second time."""

from __future__ import annotations

from collections import Counter

from django.db import transaction
from django.utils import timezone

import tasks
from catalog.models import Hardware, Problem
from evaluator import roofline
from evaluator.results import Mode

CPU_HARDWARE = {"slug": "cpu", "name": "CPU (gloo, 2 processes)", "profile": "h100", "gpu_count": 2, "mode": Mode.CPU.value}


def problem_fields(spec) -> dict:
    tolerances = (spec.tolerance,) if not isinstance(spec.tolerance, tuple) else spec.tolerance
    return {
        "pkb_id": spec.pkb_id,
        "title": spec.title,
        "level": spec.level,
        "parallelism": spec.parallelism,
        "origin": spec.origin,
        "description": spec.description,
        "dtype": spec.dtype,
        "shapes": [{"name": s.name, "dims": dict(s.dims), "default": s.default} for s in spec.shapes],
        "world_sizes": list(spec.world_sizes),
        "tolerance": "; ".join(t.describe() + (f" ({t.reason})" if t.reason else "") for t in tolerances),
        "bitwise": spec.bitwise,
        "reference_source": tasks.reference_source(spec.id),
        "active": True,
    }


@transaction.atomic
def sync_problems() -> Counter:
    counts: Counter = Counter()
    specs = tasks.problems()
    existing = {p.slug: p for p in Problem.objects.select_for_update()}
    for slug, spec in specs.items():
        fields = problem_fields(spec)
        problem = existing.get(slug)
        if problem is None:
            Problem.objects.create(slug=slug, **fields)
            counts["created"] += 1
        elif any(getattr(problem, k) != v for k, v in fields.items()):
            for k, v in fields.items():
                setattr(problem, k, v)
            problem.synced_at = timezone.now()
            problem.save()
            counts["updated"] += 1
        else:
            counts["unchanged"] += 1
    counts["deactivated"] = Problem.objects.filter(active=True).exclude(slug__in=specs).update(active=False)
    return counts


def hardware_from_profile(slug: str, profile: str, gpu_count: int, mode: str = Mode.GPU.value, name: str = "") -> Hardware:
    """An unsaved Hardware row, named after its profile's GPU unless `name` is given."""
    name = name or f"{gpu_count}x {roofline.profile(profile).name}"
    return Hardware(slug=slug, name=name, profile=profile, gpu_count=gpu_count, mode=mode)


def ensure_cpu_hardware() -> bool:
    """The embedded default evaluates on CPU processes; returns True if the row was created."""
    if Hardware.objects.filter(slug=CPU_HARDWARE["slug"]).exists():
        return False
    hardware_from_profile(**CPU_HARDWARE).save()
    return True
