import re

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from submissions.models import Evaluation, Submission

pytestmark = pytest.mark.django_db


@pytest.fixture
def form(problem, cpu, h200, good_code):
    return {
        "problem": "allreduce",
        "model_tag": "gpt-5.5",
        "backend": "cuda",
        "hardware": ["cpu", "h200x4"],
        "code": good_code,
        "sample_index": "0",
        "run_label": "run-1",
    }


def test_needs_login(client, db):
    response = client.get("/submit/")
    assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")


def test_pasted_code_is_stored_and_queued_on_each_hardware(
    client, user, form, broker, django_capture_on_commit_callbacks
):
    client.force_login(user)
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post("/submit/", {**form, "code": form["code"].replace("\n", "\r\n")})
    sub = Submission.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/submissions/{sub.pk}/"
    assert sub.code == form["code"] and sub.owner == user and sub.run_label == "run-1"
    evaluations = {ev.hardware.slug: ev for ev in sub.evaluations.all()}
    assert {k: (ev.world_size, ev.mode, ev.state) for k, ev in evaluations.items()} == {
        "cpu": (2, "cpu", "queued"),
        "h200x4": (4, "gpu", "queued"),
    }
    assert sorted(broker.sent) == sorted(ev.pk for ev in evaluations.values())


def test_upload(client, user, form, good_code):
    client.force_login(user)
    upload = SimpleUploadedFile("1_allreduce_cuda.py", good_code.encode())
    response = client.post("/submit/", {**form, "code": "", "upload": upload})
    assert response.status_code == 302 and Submission.objects.get().code == good_code


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        (b"\xff\xfe\x00garbage", "binary"),
        (b"def solution(x):\n    return '\xe9'\n", "not UTF-8"),
        (b"def solution(:\n", "syntax error on line 1"),
        (b"def other():\n    pass\n", "does not define a top-level"),
        (b"def solution():\n    pass\n" + b"#" * 300_000, "the limit is 262,144 bytes"),
    ],
)
def test_invalid_uploads_are_rejected_and_nothing_is_queued(
    client, user, form, broker, payload, message, django_capture_on_commit_callbacks
):
    client.force_login(user)
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post("/submit/", {**form, "code": "", "upload": SimpleUploadedFile("s.py", payload)})
    assert response.status_code == 200
    assert message in response.content.decode()
    assert not Submission.objects.exists() and not Evaluation.objects.exists() and broker.sent == []


def test_paste_and_upload_together_is_refused(client, user, form, good_code):
    client.force_login(user)
    response = client.post("/submit/", {**form, "upload": SimpleUploadedFile("s.py", good_code.encode())})
    assert "not both" in response.content.decode() and not Submission.objects.exists()


def test_hardware_and_model_tag_are_checked(client, user, form):
    client.force_login(user)
    response = client.post("/submit/", {**form, "hardware": [], "model_tag": "bad tag!"})
    errors = response.context["form"].errors
    assert "hardware" in errors and "model_tag" in errors and not Submission.objects.exists()


def test_rate_limit_is_a_form_error(client, user, form, settings):
    settings.PKB_SUBMISSIONS_PER_HOUR = 2
    client.force_login(user)
    for _ in range(2):
        assert client.post("/submit/", form).status_code == 302
    response = client.post("/submit/", form)
    assert response.status_code == 200 and "at most 2 submissions per hour" in response.content.decode()
    assert Submission.objects.count() == 2


def test_staff_are_not_rate_limited(client, admin_user, form, settings):
    settings.PKB_SUBMISSIONS_PER_HOUR = 1
    client.force_login(admin_user)
    for _ in range(3):
        assert client.post("/submit/", form).status_code == 302


def test_form_preselects_the_problem(client, user, problem, cpu):
    client.force_login(user)
    response = client.get("/submit/?problem=allreduce")
    assert response.context["form"].initial["problem"] == "allreduce"
    assert 'value="allreduce" selected' in response.content.decode()


def test_an_example_fills_in_the_form_on_hardware_that_runs_it(client, user, problem, cpu, h200):
    client.force_login(user)
    response = client.get("/submit/?example=allreduce_ring")
    form = response.context["form"]
    assert form.initial["problem"] == "allreduce" and form.initial["backend"] == "pytorch"
    assert form.initial["model_tag"] == "example" and [hw.slug for hw in form.initial["hardware"]] == ["cpu"]
    assert "def solution" in form.initial["code"] and "dist.isend" in form.initial["code"]
    body = response.content.decode()
    assert "Loaded the example" in body and "It runs on cpu: press Submit." in body
    assert re.search(r'value="cpu"[^>]*checked', body) and not re.search(r'value="h200x4"[^>]*checked', body)

    gpu_only = client.get("/submit/?example=allgather_symm_mem").context["form"].initial
    assert [hw.slug for hw in gpu_only["hardware"]] == ["h200x4"] and gpu_only["backend"] == "cuda"
    assert "example" not in client.get("/submit/?example=../../etc/passwd").context["form"].initial.get("model_tag", "")


def test_an_example_submitted_as_loaded_is_queued(
    client, user, problem, cpu, broker, django_capture_on_commit_callbacks
):
    client.force_login(user)
    form = client.get("/submit/?example=allreduce_ring").context["form"]
    data = {name: form[name].value() for name in ("problem", "model_tag", "backend", "code", "sample_index")}
    data["hardware"] = [hw.slug for hw in form.initial["hardware"]]
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post("/submit/", data)
    sub = Submission.objects.get()
    assert response.status_code == 302 and sub.model_tag == "example" and sub.backend == "pytorch"
    assert [(ev.hardware.slug, ev.state) for ev in sub.evaluations.all()] == [("cpu", "queued")]
