"""Names that pass for others: usernames that look like an existing one (homoglyphs such as
Cyrillic "а" for Latin "a", capital "I" for "l", "0" for "o") or carry right-to-left overrides are
refused at sign-up; run labels lose their bidirectional and invisible formatting characters."""

import pytest

from accounts.models import ApiToken
from accounts.names import skeletons
from common.text import neutralize
from submissions.models import Submission

pytestmark = pytest.mark.django_db
PASSWORD = "a long passphrase 42"


def sign_up(client, username):
    return client.post("/accounts/signup/", {"username": username, "password1": PASSWORD, "password2": PASSWORD})


@pytest.mark.parametrize(
    "username",
    [
        "\u0430lice",  # Cyrillic small a
        "\u0430\u0406\u0456\u0441\u0435",  # all Cyrillic: а І і с е
        "aIice",  # capital i for the l
        "a1ice",
        "\uff41lice",  # fullwidth a
        "b0b",
    ],
)
def test_a_username_that_looks_like_an_existing_one_is_refused(client, user, other_user, username, django_user_model):
    response = sign_up(client, username)
    assert response.status_code == 200
    errors = " ".join(response.context["form"].errors["username"])
    assert any(why in errors for why in ("looks too much like an existing one", "mixes scripts", "already exists"))
    assert not django_user_model.objects.filter(username=username).exists()


@pytest.mark.parametrize("username", ["bob\u202e", "\u202eadmin", "ali\u200bce", "eve\u2067"])
def test_a_username_with_bidi_or_invisible_characters_is_refused(client, username, django_user_model):
    assert sign_up(client, username).status_code == 200
    assert not django_user_model.objects.filter(username=username).exists()


@pytest.mark.parametrize("username", ["alice2", "Zoë", "Øyvind", "张伟", "гриша", "μαρία"])
def test_names_in_one_script_are_welcome(client, user, username, django_user_model):
    assert sign_up(client, username).status_code == 302
    assert django_user_model.objects.filter(username=username).exists()


def test_skeletons_agree_on_lookalikes():
    assert set(skeletons("alice")) & set(skeletons("\u0430lice")) and set(skeletons("alice")) & set(skeletons("aIice"))
    assert not set(skeletons("alice")) & set(skeletons("alice2"))


def test_run_labels_lose_bidi_controls(client, user, problem, cpu, good_code):
    label = "final\u202etxt.exe\u200b"
    token = ApiToken.objects.issue(user)[1]
    response = client.post(
        "/api/submissions",
        {"problem": "allreduce", "code": good_code, "run_label": label},
        content_type="application/json",
        headers={"Authorization": f"Bearer {token}"},
    )
    assert response.status_code == 201 and response.json()["run_label"] == "finaltxt.exe"
    client.force_login(user)
    form = {"problem": "allreduce", "model_tag": "human", "backend": "pytorch", "hardware": "cpu", "sample_index": 0}
    response = client.post("/submit/", {**form, "code": good_code, "run_label": label})
    assert response.status_code == 302
    assert sorted(Submission.objects.values_list("run_label", flat=True)) == ["finaltxt.exe", "finaltxt.exe"]
    page = client.get(response["Location"]).content.decode()
    assert "\u202e" not in page and '<bdi class="run-label">finaltxt.exe</bdi>' in page
    assert neutralize("a\u2066b\u2069c\u061c") == "abc"
