"""Why an evaluation failed: the evaluator's own account (rank, shape, the first failing trial, the
worst element, the log), shown to the code's owner and admins; everyone else, on the page and in
the API, sees the status only. The source's hash is the owner's too."""

import pytest

from accounts.models import ApiToken

pytestmark = pytest.mark.django_db

SECRET_LINE = 'File "/srv/pkb/builds/ab12/solution.py", line 7: secret_kernel_name<<<grid>>>'


@pytest.fixture
def failed(submit, worker, make_result, user, problem, cpu):
    """A wrong answer on rank 1, found in the second trial of the default shape."""

    def make(
        failure="mismatch", status="incorrect", reason=f"rank 1: output: mismatch at flat index 3089 ({SECRET_LINE})"
    ):
        sub = submit(user, problem, cpu)
        ev = sub.evaluations.get()
        doc = make_result(ev, status=status, reason=reason)
        doc["log_tail"] = f"== rank 1 ==\nTraceback (most recent call last):\n  {SECRET_LINE}\nRuntimeError: boom"
        doc["environment"]["hostname"] = "gpu-host-17.internal"
        if isinstance(failure, dict):
            doc["failure"] = failure
        elif failure == "mismatch":
            doc["shapes"][0]["correct"] = True  # the small shape passed; the default one failed; large never ran
            doc["failure"] = {
                "rank": 1,
                "shape": "default",
                "step": "trial 2 of 2",
                "call": None,
                "calls": None,
                "mismatch": {
                    "output": "output",
                    "index": [3, 17],
                    "flat_index": 3089,
                    "got": "0.5",
                    "expected": "-4.03125",
                    "max_abs_error": 4.53125,
                    "allowed": "atol=0.1, rtol=0.02",
                    "wrong": 12,
                    "elements": 1048576,
                },
            }
        else:
            doc["shapes"][0]["correct"] = True
            doc["schema"] = "pkb.result/2"  # stored before the document said where
            doc.pop("failure", None)
        worker.finish(ev, doc)
        return ev

    return make


def test_failure_details_are_for_the_owner_and_admins_only(client, failed, user, other_user, admin_user):
    ev = failed(failure=None)  # as documents were stored before `failure`
    url = f"/submissions/{ev.submission_id}/"
    sha = ev.submission.sha256
    for viewer in (None, other_user):
        if viewer:
            client.force_login(viewer)
        body = client.get(url).content.decode() + client.get(f"{url}status/").content.decode()
        assert "Wrong answer" in body
        assert "secret_kernel_name" not in body and "/srv/pkb" not in body and "gpu-host-17" not in body
        assert "mismatch at flat index" not in body and "data-failure" not in body and "Traceback" not in body
        assert sha[:16] not in body
        assert "shown to the code's owner and admins" in body
    for viewer in (user, admin_user):
        client.force_login(viewer)
        body = client.get(url).content.decode()
        assert "secret_kernel_name" in body and "data-failure" in body and "gpu-host-17" in body
    assert sha[:16] in client.get(url).content.decode()


def test_the_api_gives_others_the_status_only(client, failed, user):
    ev = failed()
    older = failed(failure=None)
    assert "secret_kernel_name" not in str(client.get(f"/api/evaluations/{older.pk}").json())
    public = client.get(f"/api/submissions/{ev.submission_id}").json()
    assert public["sha256"] is None and public["code"] is None
    [summary] = public["evaluations"]
    assert summary["status"] == "incorrect" and summary["reason"] == ""
    result = client.get(f"/api/evaluations/{ev.pk}").json()["result"]
    assert result["status"] == "incorrect"
    assert not {"reason", "failing_rank", "failure", "log_tail"} & set(result)
    assert "hostname" not in result["environment"]
    assert all(set(shape) == {"name", "dims", "default"} for shape in result["shapes"])
    assert "secret_kernel_name" not in str(public) + str(result)

    auth = {"Authorization": "Bearer " + ApiToken.objects.issue(user)[1]}
    own = client.get(f"/api/submissions/{ev.submission_id}", headers=auth).json()
    assert own["sha256"] == ev.submission.sha256 and "secret_kernel_name" in own["evaluations"][0]["reason"]
    result = client.get(f"/api/evaluations/{ev.pk}", headers=auth).json()["result"]
    assert result["failure"]["mismatch"]["got"] == "0.5" and "Traceback" in result["log_tail"]


def test_a_correct_result_stays_public(client, judged, user, problem, cpu):
    ev = judged(user, problem, cpu, speedups=(1, 2, 4))
    result = client.get(f"/api/evaluations/{ev.pk}").json()["result"]
    assert result["summary"]["speedup"] == pytest.approx(2.0) and result["shapes"][0]["solution"]["time_us"]
    assert "Correct" in client.get(f"/submissions/{ev.submission_id}/").content.decode()


def test_the_failure_is_shown_as_the_evaluator_gave_it(client, failed, user):
    ev = failed()
    client.force_login(user)
    response = client.get(f"/submissions/{ev.submission_id}/")
    [view] = response.context["evaluations"]
    failure = view["failure"]
    assert (failure["rank"], failure["shape"], failure["step"]) == (1, "default", "trial 2 of 2")
    assert [(s["name"], s["state"]) for s in failure["steps"]] == [
        ("trial 1 of 2", "passed"),
        ("trial 2 of 2", "failed"),
        ("warm-up", "not run"),
        ("timing", "not run"),
        ("public trial", "not run"),
    ]
    assert [(r["name"], r["failing"], r["not_run"]) for r in view["shapes"]] == [
        ("small", False, False),
        ("default", True, False),
        ("large", False, True),
    ]
    body = response.content.decode()
    assert "data-rank>1 of 2" in body and "data-shape>default" in body
    assert "data-first-failure" in body and "trial 2 of 2: first failure" in body
    assert "<code>[3, 17]</code>" in body and "<code>-4.03125</code>" in body and "12 of 1048576 elements" in body
    # The log keeps its lines: one per line, as the evaluator wrote them.
    assert "== rank 1 ==\nTraceback (most recent call last):\n" in body
    assert 'class="failing" data-failing-shape' in body


def test_a_document_from_before_the_failure_field_still_shows_where(client, failed, user):
    ev = failed(failure=None)
    client.force_login(user)
    [view] = client.get(f"/submissions/{ev.submission_id}/").context["evaluations"]
    assert view["failure"]["rank"] == 1 and view["failure"]["shape"] == "default"
    assert view["failure"]["mismatch"] is None


def test_a_compile_error_names_the_build(client, failed, user):
    build = {"rank": 0, "shape": None, "step": "build", "call": None, "calls": None, "mismatch": None}
    ev = failed(build, status="compile_error", reason=f"rank 0: importing the solution failed: {SECRET_LINE}")
    assert client.get(f"/submissions/{ev.submission_id}/").context["evaluations"][0]["failure"] is None
    client.force_login(user)
    response = client.get(f"/submissions/{ev.submission_id}/")
    [view] = response.context["evaluations"]
    assert view["status_text"] == "Did not compile" and view["failure"]["shape"] is None
    assert "data-step>loading and building the solution" in response.content.decode()
