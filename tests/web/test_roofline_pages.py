"""The roofline shown next to a result is the one of that result's hardware: GPU hardware shows its
own numbers at the world size the result ran at, every hardware profile has its row on the problem
page, and a CPU hardware says the roofline does not apply instead of showing H100 figures."""

import pytest

pytestmark = pytest.mark.django_db

# allreduce at the default shape (1024 x 1024 bf16) on W ranks: 2 (W-1)/W * 2 MiB over NVLink
DEFAULT_BYTES = 1024 * 1024 * 2


def ring_us(world_size: int, nvlink_gbps: float) -> float:
    return 2 * (world_size - 1) / world_size * DEFAULT_BYTES / (nvlink_gbps * 1e9) * 1e6


@pytest.fixture
def allreduce(db):
    from catalog.models import Problem
    from catalog.sync import sync_problems

    sync_problems()
    return Problem.objects.get(slug="allreduce")


def section(body: str, slug: str) -> str:
    return body.split(f'data-hardware="{slug}"')[1].split("</section>")[0]


def test_problem_page_gives_each_hardware_its_own_roofline_beside_its_results(
    client, allreduce, cpu, h200, judged, user
):
    judged(user, allreduce, cpu, speedups=(2, 2, 2))
    on_h200 = judged(user, allreduce, h200, speedups=(1.5, 2, 3))
    response = client.get("/problems/allreduce/")
    body = response.content.decode()
    results = {r.hardware.slug: r for r in response.context["results"]}

    # CPU: its results shape by shape, and no roofline (the cpu hardware carries H100 numbers).
    assert not results["cpu"].has_roofline
    assert all(s.t_roof_us is None and s.bound is None and s.utilization is None for s in results["cpu"].shapes)
    assert [s.speedup for s in results["cpu"].shapes] == [2, 2, 2]
    cpu_html = section(body, "cpu")
    assert 'data-roofline="no"' in cpu_html and "No roofline here" in cpu_html
    assert "-bound" not in cpu_html and ">T_roof</th>" not in cpu_html

    # H200: T_roof with H200 numbers at the result's world size, utilization against that T_roof.
    h200_rows = {s.name: s for s in results["h200x4"].shapes}
    default = h200_rows["default"]
    assert results["h200x4"].world_size == on_h200.world_size == 4
    assert default.bound == "nvlink" and default.t_roof_us == pytest.approx(ring_us(4, 450))
    assert default.speedup == 2 and default.utilization == pytest.approx(default.t_roof_us / default.solution_us)
    assert "nvlink-bound" in section(body, "h200x4")


def test_problem_page_lists_the_roofline_of_every_hardware_profile(client, allreduce, cpu):
    from evaluator.roofline import profiles

    response = client.get("/problems/allreduce/")
    rows = {(r.profile.key, r.world_size): r for r in response.context["profiles"]}
    assert set(rows) == {(key, ws) for key in profiles() for ws in allreduce.world_sizes}
    for key, gbps in (("h100", 450), ("b200", 900)):
        default = next(c for c in rows[key, 4].cells if c.shape == "default")
        assert default.t_roof_us == pytest.approx(ring_us(4, gbps))
    body = response.content.decode()
    assert all(f'data-profile="{key}"' in body for key in profiles())


def test_a_cpu_run_shows_no_gpu_roofline_on_its_page_or_leaderboard(
    client, allreduce, cpu, h200, submit, worker, make_result, user
):
    from casestudies.models import CaseStudy

    both = submit(user, allreduce, [cpu, h200])
    for ev in both.evaluations.all():
        worker.finish(ev, make_result(ev, utilization=0.5))  # the document carries an NVLink-bound roofline
    on_cpu, on_h200 = both.evaluations.get(hardware=cpu), both.evaluations.get(hardware=h200)
    client.force_login(user)
    response = client.get(f"/submissions/{both.pk}/")
    views = {e["evaluation"].hardware.slug: e for e in response.context["evaluations"]}
    assert views["cpu"]["roofline"] is False and views["cpu"]["roofline_chart"] is None
    assert all(r["t_roof_us"] is None and r["bound"] is None for r in views["cpu"]["shapes"])
    assert views["h200x4"]["roofline"] is True and views["h200x4"]["shapes"][0]["bound"] == "nvlink"
    body = response.content.decode()
    cpu_part = body.split(f'id="evaluation-{on_cpu.pk}"')[1].split("</section>")[0]
    h200_part = body.split(f'id="evaluation-{on_h200.pk}"')[1].split("</section>")[0]
    assert "No roofline" in cpu_part and "nvlink" not in cpu_part and "of the roofline" not in cpu_part
    assert "T_roof" in h200_part and "nvlink" in h200_part and "50.0% of the roofline" in h200_part

    cpu_board = client.get("/problems/allreduce/leaderboard/cpu/").content.decode()
    assert ">Roofline</th>" not in cpu_board and "50.0%" not in cpu_board
    assert ">Roofline</th>" in client.get("/problems/allreduce/leaderboard/h200x4/").content.decode()

    study = CaseStudy.objects.create(title="Study", slug="study", published=True, body="text")
    study.evaluations.add(on_cpu, on_h200)
    rows = client.get("/case-studies/study/").content.decode().split("<tbody>")[1].split("</tr>")
    assert "n/a" in next(r for r in rows if "<td>cpu</td>" in r)
    assert "50.0%" in next(r for r in rows if "<td>h200x4</td>" in r)
