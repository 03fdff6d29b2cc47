"""A model's name is owned by the account that registered it. Model comparisons count, by default,
only the runs its owner vouches for, so that tagging a run "gpt-5.5" moves no one else's
statistics; unregistered names are unverified, left out unless asked for."""

import pytest

from accounts.models import ApiToken
from leaderboards.cache import results_version
from leaderboards.comparisons import per_problem_counts

pytestmark = pytest.mark.django_db


@pytest.fixture
def alice_api(user):
    return {"Authorization": "Bearer " + ApiToken.objects.issue(user)[1]}


def register(client, headers, name):
    return client.post("/api/models", {"name": name}, content_type="application/json", headers=headers)


def scores(client, **params):
    body = client.get("/api/compare/models", {"hardware": "cpu", **params}).json()
    return {m["model"]: (m.get("owner"), m["fast_p"][0], m["samples"]) for m in body["models"]}


def test_someone_elses_runs_under_a_registered_name_do_not_move_its_statistics(
    client, alice_api, judged, user, other_user, problem, other_problem, cpu
):
    register(client, alice_api, "gpt-5.5")
    judged(user, problem, cpu, model_tag="gpt-5.5")
    judged(user, other_problem, cpu, model_tag="gpt-5.5")
    for _ in range(3):  # bob tags his broken runs with alice's model
        judged(other_user, problem, cpu, status="incorrect", model_tag="gpt-5.5")
        judged(other_user, other_problem, cpu, status="compile_error", model_tag="gpt-5.5")
    assert scores(client) == {"gpt-5.5": ("alice", 1.0, 2)}
    assert scores(client, include_unverified="true")["gpt-5.5"] == ("alice", pytest.approx(1 / 4), 8)

    page = client.get("/problems/allreduce/leaderboard/cpu/").content.decode()
    assert page.count(">unverified</span>") == 0  # bob has no correct run to rank
    judged(other_user, problem, cpu, model_tag="gpt-5.5", speedups=(9, 9, 9))
    entries = client.get("/api/leaderboards/allreduce/cpu").json()
    assert [(e["owner"], e["vouched"]) for e in entries] == [("bob", False), ("alice", True)]
    assert client.get("/problems/allreduce/leaderboard/cpu/").content.decode().count(">unverified</span>") == 1


def test_the_owner_vouches_for_other_accounts(client, alice_api, judged, user, other_user, problem, cpu):
    register(client, alice_api, "team-model")
    judged(other_user, problem, cpu, model_tag="team-model")
    assert scores(client) == {}
    client.force_login(user)
    model = user.model_names.get()
    before = results_version()
    response = client.post(f"/accounts/models/{model.pk}/vouch/", {"accounts": "bob, nobody"})
    assert response.status_code == 302 and model.vouched_accounts.count() == 0  # an unknown name: nothing changes
    client.post(f"/accounts/models/{model.pk}/vouch/", {"accounts": "bob"})
    assert list(model.vouched_accounts.values_list("username", flat=True)) == ["bob"]
    assert results_version() > before  # cached comparisons are recomputed
    assert scores(client) == {"team-model": ("alice", 1.0, 1)}
    assert "bob" in client.get("/accounts/").content.decode()
    client.force_login(other_user)  # only the owner says whom it vouches for
    assert client.post(f"/accounts/models/{model.pk}/vouch/", {"accounts": ""}).status_code == 404


def test_unregistered_names_are_unverified(
    client, alice_api, user, problem, cpu, good_code, worker, make_result, django_capture_on_commit_callbacks
):
    from submissions.models import Evaluation

    with django_capture_on_commit_callbacks(execute=True):  # published, as after a real commit
        response = client.post(
            "/api/submissions",
            {"problem": "allreduce", "code": good_code, "model_tag": "mystery-model"},
            content_type="application/json",
            headers=alice_api,
        )
    ev = Evaluation.objects.get(submission_id=response.json()["id"])
    worker.finish(ev, make_result(ev))
    assert scores(client) == {}
    assert scores(client, include_unverified="true") == {"mystery-model": (None, 1.0, 1)}
    page = client.get("/compare/models/?hardware=cpu&unverified=1").content.decode()
    assert "mystery-model" in page and ">unverified</span>" in page
    assert "mystery-model" not in client.get("/compare/models/?hardware=cpu").content.decode()
    assert ">unverified</span>" in client.get(f"/submissions/{ev.submission_id}/").content.decode()
    assert client.get("/api/models").json() == []


def test_registration_is_first_come_and_case_blind(client, alice_api, other_user, user):
    assert register(client, alice_api, "gpt-5.5").json()["owner"] == "alice"
    bob = {"Authorization": "Bearer " + ApiToken.objects.issue(other_user)[1]}
    taken = register(client, bob, "GPT-5.5")
    assert taken.status_code == 409 and "registered by alice" in taken.json()["detail"]
    assert register(client, bob, "not a tag!").status_code in (400, 422)
    assert register(client, {}, "free-model").status_code == 401
    client.force_login(other_user)
    client.post("/accounts/models/", {"name": "bob-model"})
    assert [m["name"] for m in client.get("/api/models").json()] == ["bob-model", "gpt-5.5"]


def test_the_comparison_stays_one_query(judged, user, problem, cpu, django_assert_num_queries):
    judged(user, problem, cpu, model_tag="gpt-5.5")
    with django_assert_num_queries(1):
        rows = per_problem_counts(cpu)
    assert [(r["model_tag"], r["n"]) for r in rows] == [("gpt-5.5", 1)]
