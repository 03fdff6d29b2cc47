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


def test_ties_are_shown_as_ties_with_their_intervals(client, judged, user, other_user, problem, cpu):
    judged(user, problem, cpu, speedups=(3, 3, 3), interval=0.1)
    judged(other_user, problem, cpu, speedups=(2.8, 2.8, 2.8), interval=0.1)
    judged(other_user, problem, cpu, speedups=(1.5, 1.5, 1.5), model_tag="human")  # no interval
    body = client.get("/problems/allreduce/leaderboard/cpu/").content.decode()
    assert body.count('title="tied: their speedup intervals overlap">=1</span>') == 2
    assert "2.73–3.30" in body and "2.55–3.08" in body
    board = client.get("/api/leaderboards/allreduce/cpu").json()
    assert [(e["rank"], e["tied"]) for e in board] == [(1, True), (1, True), (3, False)]
    assert board[0]["speedup_interval"] == [pytest.approx(3 / 1.1), pytest.approx(3.3)]
    assert board[2]["speedup_interval"] is None
