import re

import pytest

pytestmark = pytest.mark.django_db


@pytest.fixture
def synced(db):
    from catalog.sync import sync_problems

    sync_problems()


def test_problem_page_shows_reference_shapes_roofline_and_leaderboards(client, synced, judged, user, cpu, h200):
    from catalog.models import Problem

    problem = Problem.objects.get(slug="allreduce")
    judged(user, problem, cpu, speedups=(2, 2, 2))
    response = client.get("/problems/allreduce/")
    body = response.content.decode()
    assert response.status_code == 200
    assert 'class="highlight"' in body and "all_reduce" in body  # highlighted reference code
    assert "M=8192, N=8192" in body
    rows = {r.hardware.slug: r for r in response.context["results"]}
    assert rows["h200x4"].world_size == 4 and rows["cpu"].world_size == 2
    # allreduce is NVLink-bound at the default shape on H200: 2(W-1)/W * 2 MiB / 450 GB/s
    default = next(c for c in rows["h200x4"].shapes if c.name == "default")
    assert default.bound == "nvlink"
    assert default.t_roof_us == pytest.approx(2 * 3 / 4 * 1024 * 1024 * 2 / 450e9 * 1e6)
    boards = dict((hw.slug, entries) for hw, entries in response.context["leaderboards"])
    assert len(boards["cpu"]) == 1 and boards["h200x4"] == []
    assert "Download prompt" in body


def test_roofline_follows_the_hardware_profile(client, synced, h200):
    h200.profile = "b200"  # NVLink 900 GB/s in evaluator/hardware.toml
    h200.save()
    rows = {r.hardware.slug: r for r in client.get("/problems/allreduce/").context["results"]}
    default = next(c for c in rows["h200x4"].shapes if c.name == "default")
    assert default.t_roof_us == pytest.approx(2 * 3 / 4 * 1024 * 1024 * 2 / 900e9 * 1e6)


def test_problem_outside_the_suite_has_no_roofline(client, problem):
    problem.slug = "not-in-tasks"
    problem.save()
    response = client.get("/problems/not-in-tasks/")
    assert response.status_code == 200 and response.context["profiles"] == []
    assert "No roofline model for this problem." in response.content.decode()


def test_unknown_problem_is_404(client, db):
    assert client.get("/problems/nope/").status_code == 404


def test_offers_the_examples_that_run_without_a_gpu_first(client, synced, cpu, h200):
    body = client.get("/problems/allgather/").content.decode()
    listed = re.findall(r'data-example="([^"]+)"', body)
    assert listed == ["allgather_ring", "allgather_symm_mem"]  # the CPU one first, then the GPU one
    ring = body.split('data-example="allgather_ring"')[1].split("</li>")[0]
    assert "runs on the CPU" in ring and "/submit/?example=allgather_ring" in ring and "runs on cpu, h200x4" in ring
    symm = body.split('data-example="allgather_symm_mem"')[1].split("</li>")[0]
    assert "needs GPUs" in symm and "runs on h200x4" in symm


def test_says_when_no_hardware_here_runs_an_example(client, synced, cpu):
    symm = client.get("/problems/allgather/").content.decode().split('data-example="allgather_symm_mem"')[1]
    assert "none of this platform's hardware runs it" in symm.split("</li>")[0]
