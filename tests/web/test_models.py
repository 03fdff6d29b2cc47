import hashlib

import pytest
from django.core.management import call_command

import tasks
from catalog.models import Hardware, Problem
from catalog.sync import sync_problems
from submissions.models import Evaluation, Submission

pytestmark = pytest.mark.django_db


def test_cpu_hardware_exists_after_migrations():
    cpu = Hardware.objects.get(slug="cpu")
    assert (cpu.mode, cpu.gpu_count, cpu.profile, cpu.queue) == ("cpu", 2, "h100", "gpu.cpu")
    assert cpu.roofline_profile().hbm_tbps == 3.35


def test_sync_problems_is_idempotent_and_deactivates_removed(capsys):
    call_command("sync_problems")
    first = capsys.readouterr().out
    assert f"{len(tasks.problems())} created" in first
    Problem.objects.create(slug="retired", title="Gone", level=1, parallelism="collective")
    call_command("sync_problems")
    second = capsys.readouterr().out
    assert f"0 created, 0 updated, {len(tasks.problems())} unchanged, 1 deactivated" in second
    assert not Problem.objects.get(slug="retired").active
    allreduce = Problem.objects.get(slug="allreduce")
    assert allreduce.pkb_id == 1 and "dist.all_reduce" in allreduce.reference_source
    assert [s["name"] for s in allreduce.shapes] == [s.name for s in tasks.get("allreduce").shapes]


def test_sync_updates_changed_rows():
    sync_problems()
    Problem.objects.filter(slug="allgather").update(title="stale", active=False)
    counts = sync_problems()
    assert counts["updated"] == 1
    p = Problem.objects.get(slug="allgather")
    assert p.title == tasks.get("allgather").title and p.active and p.bitwise


def test_submission_hashes_its_code(user, problem):
    sub = Submission.objects.create(problem=problem, owner=user, model_tag="human", backend="cuda", code="x = 1\n")
    assert sub.sha256 == hashlib.sha256(b"x = 1\n").hexdigest()


def test_code_visibility(user, other_user, admin_user, problem):
    from django.contrib.auth.models import AnonymousUser

    sub = Submission.objects.create(problem=problem, owner=user, model_tag="human", backend="cuda", code="x=1")
    assert sub.code_visible_to(user) and sub.code_visible_to(admin_user)
    assert not sub.code_visible_to(other_user) and not sub.code_visible_to(AnonymousUser())


def test_topology_states_multicast(h200, cpu):
    assert "NVLink multicast (NVLS): NOT available" in h200.topology()
    assert "4x NVIDIA H200 SXM" in h200.topology()
    assert "gloo" in cpu.topology()


def test_evaluation_defaults(user, problem, cpu):
    sub = Submission.objects.create(problem=problem, owner=user, model_tag="human", backend="cuda", code="x=1")
    ev = Evaluation.objects.create(submission=sub, hardware=cpu, world_size=2, mode="cpu")
    assert (ev.state, ev.stage, ev.status, ev.hidden, ev.finished) == ("queued", "queued", None, False, False)
