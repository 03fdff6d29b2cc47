"""Inputs that used to reach a 500: digits that are not ASCII, NUL characters, bodies over the
upload limit, and source files the parser cannot nest. Each is a 4xx a person can read (the fuzz
test in test_fuzz.py covers every route; these pin the cases down)."""

import pytest

from accounts.models import ApiToken
from submissions.validation import InvalidCode, validate_code

pytestmark = pytest.mark.django_db

DEEP = "def solution(x):\n    return x\n\n\ny = " + "+".join(["1"] * 60_000) + "\n"  # 120 kB, nests 60,000 deep


@pytest.mark.parametrize("level", ["%C2%B2", "%D9%A1", "9" * 5000, "7"])
def test_catalog_and_comparisons_ignore_a_level_that_is_no_level(client, problem, cpu, level):
    for path in ("/", "/compare/models/"):
        response = client.get(f"{path}?level={level}")
        assert response.status_code == 200, path
    assert "All-reduce" in client.get(f"/?level={level}", headers={"HX-Request": "true"}).content.decode()


def test_nul_in_a_query_is_a_bad_request(client, problem):
    response = client.get("/?q=a%00b")
    assert response.status_code == 400 and "NUL" in response.content.decode()
    response = client.get("/api/compare/models?hardware=cpu&models=a%00")
    assert response.status_code == 400 and "NUL" in response.json()["detail"]


def test_an_api_body_over_the_limit_is_a_413_with_a_json_error(client, user, problem, cpu, settings):
    token = ApiToken.objects.issue(user)[1]
    body = b'{"problem": "allreduce", "code": "' + b"x" * (settings.DATA_UPLOAD_MAX_MEMORY_SIZE + 1) + b'"}'
    response = client.post(
        "/api/submissions", body, content_type="application/json", headers={"Authorization": f"Bearer {token}"}
    )
    assert response.status_code == 413
    assert response.json() == {"detail": "the request body is larger than the limit of 2.6 MB"}


def test_a_form_over_the_limit_is_a_413(client, user, problem, cpu, settings):
    client.force_login(user)
    response = client.post(
        "/submit/", {"problem": "allreduce", "code": "x" * (settings.DATA_UPLOAD_MAX_MEMORY_SIZE + 1)}
    )
    assert response.status_code == 413 and "limit" in response.content.decode()


def test_source_nested_too_deeply_for_the_parser_is_a_validation_error():
    with pytest.raises(InvalidCode, match="nested too deeply"):
        validate_code(DEEP)
    with pytest.raises(InvalidCode, match="nested too deeply"):
        validate_code("def solution(x):\n    return x\n\n\ny = " + "-" * 100_000 + "1\n")


def test_the_api_and_the_form_refuse_deeply_nested_source(client, user, problem, cpu):
    token = ApiToken.objects.issue(user)[1]
    response = client.post(
        "/api/submissions",
        {"problem": "allreduce", "code": DEEP, "backend": "pytorch"},
        content_type="application/json",
        headers={"Authorization": f"Bearer {token}"},
    )
    assert response.status_code == 400 and "nested too deeply" in response.json()["detail"]
    client.force_login(user)
    form = {"problem": "allreduce", "model_tag": "human", "backend": "pytorch", "hardware": "cpu", "sample_index": 0}
    response = client.post("/submit/", {**form, "code": DEEP})
    assert response.status_code == 200 and "nested too deeply" in response.content.decode()
