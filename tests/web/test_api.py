import pytest

from accounts.models import ApiToken
from evaluator.results import SCHEMA
from submissions.models import Evaluation, Submission

pytestmark = pytest.mark.django_db


@pytest.fixture
def token(user):
    return ApiToken.objects.issue(user, "harness")[1]


@pytest.fixture
def auth(token):
    return {"Authorization": f"Bearer {token}"}


def post(client, payload, headers):
    return client.post("/api/submissions", payload, content_type="application/json", headers=headers)


def test_submit_poll_and_results(
    client, auth, problem, cpu, h200, good_code, broker, worker, make_result, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        response = post(
            client,
            {
                "problem": "allreduce",
                "model_tag": "gpt-5.5",
                "backend": "triton",
                "code": good_code,
                "hardware": ["h200x4", "cpu"],
                "sample_index": 3,
            },
            auth,
        )
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["code"] == good_code and body["owner"] == "alice" and body["finished"] is False
    assert [(e["hardware"], e["state"], e["queue_position"]) for e in body["evaluations"]] == [
        ("h200x4", "queued", 1),
        ("cpu", "queued", 1),
    ]
    assert sorted(broker.sent) == sorted(e["id"] for e in body["evaluations"])

    for ev in Evaluation.objects.all():
        worker.finish(ev, make_result(ev, speedups=(2, 2, 2)))
    polled = client.get(f"/api/submissions/{body['id']}").json()
    assert polled["finished"] and polled["code"] is None  # anonymous: results yes, code no
    assert {e["status"] for e in polled["evaluations"]} == {"correct"}
    assert client.get(f"/api/submissions/{body['id']}", headers=auth).json()["code"] == good_code

    ev_id = body["evaluations"][0]["id"]
    public = client.get(f"/api/evaluations/{ev_id}").json()
    assert public["result"]["schema"] == SCHEMA and "log_tail" not in public["result"]
    assert "log_tail" in client.get(f"/api/evaluations/{ev_id}", headers=auth).json()["result"]

    board = client.get("/api/leaderboards/allreduce/cpu").json()
    assert [(e["rank"], e["owner"], e["model_tag"], round(e["speedup"], 3)) for e in board] == [
        (1, "alice", "gpt-5.5", 2.0)
    ]


def test_submit_defaults_to_the_sites_hardware(client, auth, problem, cpu, good_code):
    response = post(client, {"problem": "allreduce", "code": good_code}, auth)
    assert response.status_code == 201
    assert [e["hardware"] for e in response.json()["evaluations"]] == ["cpu"]
    assert response.json()["model_tag"] == "human"


def test_submit_needs_a_token(client, problem, cpu, good_code):
    assert post(client, {"problem": "allreduce", "code": good_code}, {}).status_code == 401
    assert (
        post(client, {"problem": "allreduce", "code": good_code}, {"Authorization": "Bearer pkb_nope"}).status_code
        == 401
    )
    assert not Submission.objects.exists()


@pytest.mark.parametrize(
    ("payload", "status", "message"),
    [
        ({"problem": "allreduce", "code": "def solution(:\n"}, 400, "syntax error"),
        ({"problem": "allreduce", "code": "x = 1\n"}, 400, "does not define a top-level"),
        ({"problem": "allreduce", "code": "def solution(): pass\n\x00"}, 400, "binary"),
        ({"problem": "allreduce", "code": "def solution(): pass  # \ud800\n"}, 400, "not UTF-8"),
        ({"problem": "nope", "code": "def solution(): pass\n"}, 400, "unknown problem"),
        ({"problem": "allreduce", "code": "def solution(): pass\n", "hardware": ["mars"]}, 400, "unknown or inactive"),
        ({"problem": "allreduce", "code": "def solution(): pass\n", "backend": "fortran"}, 422, ""),
        ({"problem": "allreduce", "code": "def solution(): pass\n", "run_label": "a\x00b"}, 422, ""),
    ],
)
def test_invalid_submissions_store_nothing(client, auth, problem, cpu, broker, payload, status, message):
    response = post(client, payload, auth)
    assert response.status_code == status, response.content
    assert message in str(response.json())
    assert not Submission.objects.exists() and broker.sent == []


def test_rate_limit_answers_429_with_retry_after(client, auth, problem, cpu, good_code, settings):
    settings.PKB_SUBMISSIONS_PER_HOUR = 1
    assert post(client, {"problem": "allreduce", "code": good_code}, auth).status_code == 201
    response = post(client, {"problem": "allreduce", "code": good_code}, auth)
    assert response.status_code == 429 and 0 < int(response["Retry-After"]) <= 3600
    assert "per hour" in response.json()["detail"] and Submission.objects.count() == 1


def test_catalog_endpoints(client, problem, cpu, h200):
    problems = client.get("/api/problems").json()
    assert [p["slug"] for p in problems] == ["allreduce"] and problems[0]["shapes"][1]["default"] is True
    assert "reference_source" in client.get("/api/problems/allreduce").json()
    assert client.get("/api/problems/nope").status_code == 404
    hardware = {h["slug"]: h for h in client.get("/api/hardware").json()}
    assert hardware["h200x4"]["nvls"] is False and hardware["cpu"]["queued"] == 0
    prompt = client.get("/api/problems/allreduce/prompt?hardware=h200x4")
    assert prompt.status_code == 200 and "## Rules" in prompt.content.decode()


def test_comparison_endpoints(client, judged, user, problem, cpu, h200):
    judged(user, problem, cpu, speedups=(2, 2, 2), model_tag="gpt")
    judged(user, problem, h200, speedups=(1, 1, 1), model_tag="gpt")
    models = client.get("/api/compare/models?hardware=cpu").json()
    assert models["n_problems"] == 1 and len(models["p_grid"]) == 31
    [gpt] = models["models"]
    assert gpt["model"] == "gpt" and gpt["fast_p"][0] == 1.0 and gpt["pass_at_k"] == {"1": 1.0}
    assert client.get("/api/compare/models?hardware=cpu&models=nobody").json()["models"] == []
    hw = client.get("/api/compare/hardware?a=cpu&b=h200x4").json()
    assert hw["total"] == 0  # different submissions on each
    assert client.get("/api/compare/hardware?a=cpu&b=cpu").status_code == 400


def test_openapi_schema_lists_the_operations(client, db):
    schema = client.get("/api/openapi.json").json()
    assert {
        "/api/submissions",
        "/api/submissions/{submission_id}",
        "/api/leaderboards/{problem}/{hardware}",
        "/api/compare/models",
        "/api/compare/hardware",
    } <= set(schema["paths"])
    assert "429" in schema["paths"]["/api/submissions"]["post"]["responses"]
