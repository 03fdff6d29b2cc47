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


def test_needs_two_different_hardware(client, cpu):
    response = client.get("/compare/hardware/?a=cpu&b=cpu")
    assert response.context["comparison"] is None and "Choose two different hardware" in response.content.decode()


def test_problem_filter_404(client, cpu, h200):
    assert client.get("/compare/hardware/?a=cpu&b=h200x4&problem=nope").status_code == 404
