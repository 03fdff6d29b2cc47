import pytest

pytestmark = pytest.mark.django_db


def test_leaderboard_page(client, judged, user, other_user, problem, cpu, h200):
    judged(user, problem, cpu, speedups=(2, 2, 2))
    judged(other_user, problem, cpu, speedups=(3, 3, 3))
    hidden = judged(other_user, problem, cpu, speedups=(9, 9, 9), model_tag="cheat")
    hidden.hidden = True
    hidden.save()
    response = client.get("/problems/allreduce/leaderboard/cpu/")
    assert response.status_code == 200
    assert [e.submission.owner.username for e in response.context["entries"]] == ["bob", "alice"]
    body = response.content.decode()
    assert "3.00×" in body and "9.00×" not in body and 'href="/problems/allreduce/leaderboard/h200x4/"' in body


def test_empty_and_unknown(client, problem, cpu):
    assert "No correct submission yet" in client.get("/problems/allreduce/leaderboard/cpu/").content.decode()
    assert client.get("/problems/allreduce/leaderboard/nope/").status_code == 404
