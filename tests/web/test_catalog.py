import pytest

pytestmark = pytest.mark.django_db


def test_lists_problems_with_best_speedup_per_hardware_and_solved_count(
    client, judged, user, problem, other_problem, cpu, h200
):
    judged(user, problem, cpu, speedups=(2, 2, 2))
    judged(user, problem, cpu, speedups=(3, 3, 3), model_tag="x")
    response = client.get("/")
    assert response.status_code == 200
    rows = {r["problem"].slug: r for r in response.context["rows"]}
    assert set(rows) == {"allreduce", "allgather"}
    best = dict((hw.slug, value) for hw, value in rows["allreduce"]["best"])
    assert best["cpu"] == pytest.approx(3.0) and best["h200x4"] is None
    assert rows["allreduce"]["solved"] == 2 and rows["allgather"]["solved"] == 0
    assert "3.00×" in response.content.decode()


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("?level=2", {"allgather"}),
        ("?parallelism=collective", {"allreduce"}),
        ("?q=sum+over", {"allreduce"}),
        ("?q=nothing-matches", set()),
        ("?level=banana", {"allreduce", "allgather"}),
    ],
)
def test_filters(client, problem, other_problem, query, expected):
    response = client.get("/" + query)
    assert {r["problem"].slug for r in response.context["rows"]} == expected


def test_htmx_request_gets_only_the_table(client, problem):
    response = client.get("/?q=all", headers={"HX-Request": "true"})
    body = response.content.decode()
    assert "<table>" in body and "<html" not in body


def test_inactive_problems_are_not_listed(client, problem):
    problem.active = False
    problem.save()
    assert client.get("/").context["rows"] == []


def test_newcomers_are_offered_an_example_that_runs_without_a_gpu(client, judged, user, problem, cpu, h200):
    body = client.get("/").content.decode()
    assert "New here?" in body and "/submit/?example=allreduce_ring" in body and "runs on cpu)" in body
    client.force_login(user)
    assert "New here?" in client.get("/").content.decode()
    judged(user, problem, cpu)
    assert "New here?" not in client.get("/").content.decode()  # not once they submitted something
