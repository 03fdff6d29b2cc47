import pytest

from catalog.models import Hardware
from evaluator.roofline import profiles
from submissions.models import Evaluation

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client(client, admin_user):
    client.force_login(admin_user)
    return client


def run_action(admin_client, action, ids, **form):
    data = {"action": action, "_selected_action": [str(i) for i in ids], **form}
    return admin_client.post("/admin/submissions/submission/", data)


def test_every_model_has_an_admin_page(admin_client, judged, user, problem, cpu):
    judged(user, problem, cpu)
    for path in ("catalog/problem", "catalog/hardware", "submissions/submission", "submissions/evaluation"):
        assert admin_client.get(f"/admin/{path}/").status_code == 200, path
    assert admin_client.get("/admin/casestudies/casestudy/").status_code == 200
    assert admin_client.get("/admin/accounts/apitoken/").status_code == 200
    assert admin_client.get("/admin/dispatch/workerpresence/").status_code == 200


def test_reevaluate_selected_on_a_chosen_hardware(
    admin_client, judged, user, problem, cpu, h200, admin_user, django_capture_on_commit_callbacks, broker
):
    ev = judged(user, problem, cpu)
    form_page = run_action(admin_client, "reevaluate", [ev.submission_id])
    assert form_page.status_code == 200 and "Re-evaluate submissions" in form_page.content.decode()
    with django_capture_on_commit_callbacks(execute=True):
        response = run_action(admin_client, "reevaluate", [ev.submission_id], hardware=str(h200.pk), apply="Apply")
    assert response.status_code == 302
    new = Evaluation.objects.get(hardware=h200)
    assert (new.submission_id, new.state, new.world_size, new.requested_by) == (
        ev.submission_id,
        "queued",
        4,
        admin_user,
    )
    assert broker.sent[-1] == new.pk


def test_reevaluate_every_correct_submission(admin_client, judged, user, problem, cpu, h200):
    good = judged(user, problem, cpu)
    bad = judged(user, problem, cpu, status="incorrect", model_tag="other")
    run_action(
        admin_client, "reevaluate", [bad.submission_id], hardware=str(h200.pk), every_correct="on", apply="Apply"
    )
    assert list(Evaluation.objects.filter(hardware=h200).values_list("submission_id", flat=True)) == [
        good.submission_id
    ]


def test_mark_rejected_with_a_reason(admin_client, judged, user, problem, cpu):
    ev = judged(user, problem, cpu)
    assert "reason" in run_action(admin_client, "mark_rejected", [ev.submission_id]).content.decode()
    run_action(admin_client, "mark_rejected", [ev.submission_id], reason="caches outputs by data_ptr", apply="Apply")
    ev.refresh_from_db()
    assert ev.hidden and ev.rejected_reason == "caches outputs by data_ptr"


def test_adding_hardware_queues_each_problems_leaders(admin_client, judged, user, other_user, problem, cpu, settings):
    settings.PKB_LEADERS_PER_PROBLEM = 1
    top = judged(user, problem, cpu, speedups=(3, 3, 3))
    judged(other_user, problem, cpu, speedups=(2, 2, 2))
    response = admin_client.post(
        "/admin/catalog/hardware/add/",
        {
            "slug": "b200x8",
            "name": "8x B200",
            "profile": "b200",
            "gpu_count": "8",
            "mode": "gpu",
            "active": "on",
            "created_at_0": "2026-01-01",
            "created_at_1": "00:00:00",
        },
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    hw = Hardware.objects.get(slug="b200x8")
    assert hw.roofline_profile().nvlink_gbps == 900 and hw.roofline_profile().hbm_tbps == 8.0
    assert list(Evaluation.objects.filter(hardware=hw).values_list("submission_id", flat=True)) == [top.submission_id]


def test_hardware_numbers_are_read_only_from_the_toml(admin_client, h200):
    form = admin_client.get("/admin/catalog/hardware/add/").content.decode()
    assert all(f'<option value="{key}">' in form for key in profiles())
    assert 'name="nvlink_gbps"' not in form and "evaluator/hardware.toml" in form
    page = admin_client.get(f"/admin/catalog/hardware/{h200.pk}/change/").content.decode()
    assert "HBM 4.8 TB/s" in page and "NVLink 450 GB/s" in page and "NVLS) not available" in page
    assert 'name="hbm_tbps"' not in page


def test_queue_leaders_action(admin_client, judged, user, problem, cpu, h200):
    top = judged(user, problem, cpu)
    admin_client.post("/admin/catalog/hardware/", {"action": "queue_leaders", "_selected_action": [str(h200.pk)]})
    assert list(Evaluation.objects.filter(hardware=h200).values_list("submission_id", flat=True)) == [top.submission_id]


def test_non_staff_cannot_use_the_admin(client, user):
    client.force_login(user)
    assert client.get("/admin/submissions/submission/").status_code == 302


def test_add_a_case_study_without_choosing_an_author(admin_client, admin_user, judged, user, problem, cpu):
    from casestudies.models import CaseStudy

    ev = judged(user, problem, cpu)
    form = admin_client.get("/admin/casestudies/casestudy/add/")
    assert form.status_code == 200
    response = admin_client.post(
        "/admin/casestudies/casestudy/add/",
        {
            "title": "A ring all-reduce",
            "slug": "ring",
            "body": "## Result\n\nTwice as fast.",
            "author": "",
            "published": "on",
            "evaluations": str(ev.pk),
            "created_at_0": "2026-01-01",
            "created_at_1": "00:00:00",
        },
    )
    assert response.status_code == 302, response.content.decode()[:3000]
    study = CaseStudy.objects.get(slug="ring")
    assert study.author == admin_user and list(study.evaluations.all()) == [ev]
    assert admin_client.get("/case-studies/ring/").status_code == 200


def test_reevaluating_never_doubles_a_run_that_has_not_finished(admin_client, judged, submit, user, problem, cpu, h200):
    done = judged(user, problem, cpu)
    waiting = submit(user, problem, h200, model_tag="other")
    ids = [done.submission_id, waiting.pk]
    first = run_action(admin_client, "reevaluate", ids, hardware=str(cpu.pk), apply="Apply")
    assert first.status_code == 302
    assert Evaluation.objects.filter(hardware=cpu, state="queued").count() == 2  # a rerun, and a first run
    again = run_action(admin_client, "reevaluate", ids, hardware=str(cpu.pk), apply="Apply")
    assert Evaluation.objects.filter(hardware=cpu, state="queued").count() == 2  # nothing doubled
    message = admin_client.get(again["Location"]).content.decode()
    assert "Queued 0 evaluations on cpu. 2 were already queued or running there and not queued again." in message
    run_action(admin_client, "reevaluate", [waiting.pk], hardware=str(h200.pk), apply="Apply")
    assert Evaluation.objects.filter(hardware=h200).count() == 1  # still queued: not queued again


def test_a_corrected_model_tag_reaches_the_evaluations_and_what_was_judged_stays(admin_client, judged, user, problem, cpu):
    ev = judged(user, problem, cpu, model_tag="gpt-5.5")
    sub = ev.submission
    page = admin_client.get(f"/admin/submissions/submission/{sub.pk}/change/").content.decode()
    assert 'name="model_tag"' in page and 'name="code"' not in page and 'name="problem"' not in page
    form = {
        "owner": str(sub.owner_id), "model_tag": "gpt-5.5-mini", "sample_index": "0", "run_label": "",
        "backend": sub.backend, "code": "def solution(x):\n    return x\n",
        "evaluations-TOTAL_FORMS": "1", "evaluations-INITIAL_FORMS": "1", "evaluations-MIN_NUM_FORMS": "0",
        "evaluations-MAX_NUM_FORMS": "0", "evaluations-0-id": str(ev.pk), "evaluations-0-submission": str(sub.pk),
    }  # fmt: skip
    refused = admin_client.post(f"/admin/submissions/submission/{sub.pk}/change/", {**form, "model_tag": "no spaces"})
    assert refused.status_code == 200 and "model_tag" in refused.context["adminform"].form.errors
    response = admin_client.post(f"/admin/submissions/submission/{sub.pk}/change/", form)
    assert response.status_code == 302, response.content.decode()[-3000:]
    sub.refresh_from_db()
    ev.refresh_from_db()
    assert (sub.model_tag, ev.model_tag) == ("gpt-5.5-mini", "gpt-5.5-mini")
    assert sub.code != form["code"]  # read-only: what was judged stays
