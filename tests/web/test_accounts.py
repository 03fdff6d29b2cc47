import pytest

from accounts.models import ApiToken

pytestmark = pytest.mark.django_db


def test_sign_up_logs_in(client, django_user_model):
    response = client.post(
        "/accounts/signup/",
        {"username": "carol", "email": "", "password1": "a long passphrase 42", "password2": "a long passphrase 42"},
    )
    assert response.status_code == 302
    assert client.get("/accounts/").context["user"].username == "carol"
    assert django_user_model.objects.filter(username="carol").exists()


def test_sign_up_validates(client):
    response = client.post("/accounts/signup/", {"username": "dave", "password1": "123", "password2": "124"})
    assert response.status_code == 200 and response.context["form"].errors


def test_log_in_and_out(client, user):
    response = client.post("/accounts/login/", {"username": "alice", "password": "correct horse battery"})
    assert response.status_code == 302
    assert client.post("/accounts/logout/").status_code == 302
    assert client.get("/accounts/").status_code == 302


def test_tokens_are_shown_once_and_stored_hashed(client, user, other_user):
    client.force_login(user)
    response = client.post("/accounts/", {"name": "laptop"})
    raw = response.context["new_token"]
    assert raw.startswith("pkb_") and raw in response.content.decode()
    token = ApiToken.objects.get(user=user)
    assert raw not in (token.key_hash, token.hint) and token.hint == raw[-4:]
    assert ApiToken.objects.authenticate(raw) == user
    assert raw not in client.get("/accounts/").content.decode()
    client.force_login(other_user)
    assert client.post(f"/accounts/tokens/{token.pk}/revoke/").status_code == 404  # not bob's
    client.force_login(user)
    client.post(f"/accounts/tokens/{token.pk}/revoke/")
    assert ApiToken.objects.authenticate(raw) is None


def test_inactive_users_tokens_do_not_work(user):
    _, raw = ApiToken.objects.issue(user)
    user.is_active = False
    user.save()
    assert ApiToken.objects.authenticate(raw) is None
    assert ApiToken.objects.authenticate("pkb_wrong") is None and ApiToken.objects.authenticate("") is None
