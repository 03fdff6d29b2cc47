"""Rate limits on log-in (django-axes), sign-up and API tokens: per address and per account, with a
refusal that says how long to wait (429, Retry-After)."""

import pytest

from accounts.models import ApiToken

pytestmark = pytest.mark.django_db
PASSWORD = "correct horse battery"  # the conftest users'


@pytest.fixture
def limits(settings):
    settings.AXES_FAILURE_LIMIT = settings.PKB_LOGIN_FAILURES = 3
    settings.PKB_SIGNUPS_PER_HOUR = 2
    settings.PKB_API_BAD_TOKENS_PER_HOUR = 3
    settings.PKB_API_REQUESTS_PER_MINUTE = 4
    return settings


def log_in(client, username, password, ip="10.0.0.1", path="/accounts/login/"):
    return client.post(path, {"username": username, "password": password}, REMOTE_ADDR=ip)


def test_failed_log_ins_lock_the_account_out_for_a_while(client, limits, user):
    assert [log_in(client, "alice", "wrong", ip=f"10.0.0.{i}").status_code for i in (1, 2)] == [200, 200]
    locked = log_in(client, "alice", "wrong", ip="10.0.0.3")  # a third address: the account counts
    assert locked.status_code == 429 and locked["Retry-After"] == "900"
    text = locked.content.decode()
    assert "Too many failed log-ins" in text and "try again after that" in text and "15 minutes" in text
    assert log_in(client, "alice", PASSWORD, ip="10.0.0.4").status_code == 429  # even the right password
    assert log_in(client, "alice", PASSWORD, ip="10.0.0.4", path="/admin/login/").status_code == 429


def test_failed_log_ins_lock_the_address_out_for_every_account(client, limits, user, other_user):
    for name in ("carol", "dave", "erin"):
        log_in(client, name, "guess", ip="10.9.9.9")
    assert log_in(client, "bob", PASSWORD, ip="10.9.9.9").status_code == 429
    assert log_in(client, "bob", PASSWORD, ip="10.1.1.1").status_code == 302  # elsewhere, bob may


def test_a_successful_log_in_starts_the_count_again(client, limits, user):
    log_in(client, "alice", "wrong")
    log_in(client, "alice", "wrong")
    assert log_in(client, "alice", PASSWORD).status_code == 302
    client.post("/accounts/logout/")
    log_in(client, "alice", "wrong")
    assert log_in(client, "alice", PASSWORD).status_code == 302


def test_sign_ups_per_address(client, limits):
    for i in range(2):
        form = {"username": f"user{i}x", "password1": "a long passphrase 42", "password2": "a long passphrase 42"}
        assert client.post("/accounts/signup/", form, REMOTE_ADDR="10.2.2.2").status_code == 302
        client.post("/accounts/logout/")
    refused = client.post("/accounts/signup/", {"username": "third"}, REMOTE_ADDR="10.2.2.2")
    assert refused.status_code == 429 and int(refused["Retry-After"]) <= 3600
    assert "Too many sign-ups from your address (at most 2 an hour). Try again in" in refused.content.decode()
    assert client.post("/accounts/signup/", {"username": "fourth"}, REMOTE_ADDR="10.3.3.3").status_code == 200


def test_unknown_api_tokens_lock_the_address_out(client, limits, user, problem):
    token = ApiToken.objects.issue(user)[1]

    def get(raw, ip="10.4.4.4"):
        return client.get("/api/submissions/1", headers={"Authorization": f"Bearer {raw}"}, REMOTE_ADDR=ip)

    submit = client.post(
        "/api/submissions",
        {},
        content_type="application/json",
        headers={"Authorization": "Bearer pkb_guess0"},
        REMOTE_ADDR="10.4.4.4",
    )
    assert submit.status_code == 401
    assert [get(f"pkb_guess{i}").status_code for i in (1, 2)] == [404, 404]  # the read, anonymously
    refused = get(token)  # a right token, from an address that guessed too often
    assert refused.status_code == 429 and int(refused["Retry-After"]) <= 3600
    assert "unknown API token from your address (at most 3 an hour)" in refused.json()["detail"]
    assert get(token, ip="10.5.5.5").status_code == 404  # elsewhere it works


def test_api_requests_per_account(client, limits, user):
    auth = {"Authorization": "Bearer " + ApiToken.objects.issue(user)[1]}
    codes = [client.get("/api/submissions/1", headers=auth, REMOTE_ADDR=f"10.6.6.{i}").status_code for i in range(5)]
    assert codes == [404, 404, 404, 404, 429]
    refused = client.get("/api/submissions/1", headers=auth)
    assert "more than 4 API requests in a minute. Try again in" in refused.json()["detail"]
