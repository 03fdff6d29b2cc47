import math

import pytest

pytestmark = pytest.mark.django_db


def test_speedups_side_by_side_with_bitwise_verdict(client, submit, worker, make_result, user, problem, cpu, h200):
    sub = submit(user, problem, [cpu, h200])
    for ev, s in zip(sub.evaluations.order_by("hardware__slug"), (1.0, 2.0), strict=True):
        worker.finish(ev, make_result(ev, speedups=(s, s, s)))
    response = client.get("/compare/hardware/?a=cpu&b=h200x4")
    assert response.status_code == 200
    cmp = response.context["comparison"]
    assert cmp.total == 1 and cmp.rows[0].speedup_b == pytest.approx(2.0)
    body = response.content.decode()
    assert "differ" in body  # 2 ranks vs 4 ranks: different per-rank digests
    assert response.context["chart"]["data"]["datasets"][0]["data"] == [{"x": 1.0, "y": 2.0}]


def test_rows_say_whether_outputs_match_on_every_hardware(client, submit, worker, make_result, user, problem, cpu):
    from catalog.sync import hardware_from_profile

    h200, b200 = hardware_from_profile("h200x2", "h200", 2), hardware_from_profile("b200x2", "b200", 2)
    h200.save()
    b200.save()
    sub = submit(user, problem, [cpu, h200, b200])
    for ev, digest in zip(sub.evaluations.order_by("hardware__slug"), "aab", strict=True):  # b200, cpu, h200
        worker.finish(ev, make_result(ev, digest=digest))
    body = client.get("/compare/hardware/?a=cpu&b=b200x2").content.decode()
    assert "bitwise identical" in body and "differ across 3" in body and 'title="b200x2, cpu | h200x2"' in body
    pairs = client.get("/api/compare/hardware?a=cpu&b=b200x2").json()["pairs"]
    assert pairs[0]["bitwise_identical"] is True
    assert pairs[0]["identical_on_every_hardware"] is False and pairs[0]["hardware_with_digests"] == 3
    outputs = client.get(f"/api/submissions/{sub.pk}").json()["outputs"]
    assert outputs == {"hardware": 3, "identical": False, "groups": [["b200x2", "cpu"], ["h200x2"]]}
    page = client.get(sub.get_absolute_url()).content.decode()
    assert "they differ between hardware" in page and "b200x2, cpu | h200x2" in page


def test_needs_two_different_hardware(client, cpu):
    response = client.get("/compare/hardware/?a=cpu&b=cpu")
    assert response.context["comparison"] is None and "Choose two different hardware" in response.content.decode()


def test_problem_filter_404(client, cpu, h200):
    assert client.get("/compare/hardware/?a=cpu&b=h200x4&problem=nope").status_code == 404


def test_the_geometric_mean_ratio_carries_its_interval(client, submit, worker, make_result, user, problem, cpu, h200):
    # Three submissions, b/a ratios 1, 2 and 4: logs 0, ln 2, 2 ln 2, mean ln 2, sample sd ln 2.
    for s in (1.0, 2.0, 4.0):
        sub = submit(user, problem, [cpu, h200])
        for ev, speedup in zip(sub.evaluations.order_by("hardware__slug"), (1.0, s), strict=True):
            worker.finish(ev, make_result(ev, speedups=(speedup,) * 3))
    cmp = client.get("/compare/hardware/?a=cpu&b=h200x4").context["comparison"]
    half = 1.96 * math.log(2) / math.sqrt(3)
    assert cmp.geomean_ratio == pytest.approx(2.0)
    assert cmp.geomean_ratio_interval == (pytest.approx(2 * math.exp(-half)), pytest.approx(2 * math.exp(half)))
    api = client.get("/api/compare/hardware?a=cpu&b=h200x4").json()
    assert api["geomean_ratio_interval"] == [pytest.approx(2 * math.exp(-half)), pytest.approx(2 * math.exp(half))]
