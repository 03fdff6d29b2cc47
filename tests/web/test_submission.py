import pytest

pytestmark = pytest.mark.django_db


def test_results_are_public_code_and_log_are_not(client, judged, user, other_user, problem, cpu):
    ev = judged(user, problem, cpu, speedups=(1, 2, 4))
    url = f"/submissions/{ev.submission_id}/"
    public = client.get(url).content.decode()
    assert "Correct" in public and "2.00×" in public
    assert "def solution" not in public and "secret-ish line" not in public
    assert "visible to its owner and admins" in public
    client.force_login(other_user)
    assert "def solution" not in client.get(url).content.decode()
    client.force_login(user)
    own = client.get(url).content.decode()
    assert "def solution" in own and "secret-ish line" in own


def test_shapes_per_rank_and_charts(client, judged, user, problem, cpu):
    ev = judged(user, problem, cpu, speedups=(1.5, 2.0, 3.0))
    response = client.get(f"/submissions/{ev.submission_id}/")
    [view] = response.context["evaluations"]
    assert [s["name"] for s in view["shapes"]] == ["small", "default", "large"]
    assert [s["speedup"] for s in view["shapes"]] == [1.5, 2.0, 3.0]
    assert len(view["shapes"][0]["per_rank"]) == 2
    assert view["speedup_chart"]["data"]["datasets"][0]["data"] == [1.5, 2.0, 3.0]
    assert view["roofline_chart"] is None  # cpu mode: the GPU roofline does not apply (test_roofline_pages.py)
    # Each timed pair's speedup, a line per shape: the samples behind the median.
    pairs = view["pairs_chart"]["data"]
    assert pairs["labels"] == [1, 2, 3]
    assert [d["label"] for d in pairs["datasets"]] == ["small", "default", "large"]
    assert pairs["datasets"][1]["data"] == pytest.approx([2.0, 1.6, 2.5])
    body = response.content.decode()
    assert f'id="speedup-chart-{ev.pk}"' in body and "Per-rank timings" in body
    assert f'id="pairs-chart-{ev.pk}"' in body and "Every timed pair" in body
    assert "not meaningful" in body  # cpu mode


def test_outputs_on_every_hardware(client, submit, worker, make_result, user, problem, cpu):
    from catalog.sync import hardware_from_profile

    h200 = hardware_from_profile("h200x2", "h200", 2)  # two ranks, like cpu: comparable digests
    h200.save()
    sub = submit(user, problem, [cpu, h200])
    first, second = sub.evaluations.order_by("pk")
    worker.finish(first, make_result(first))
    assert "Outputs on the public trial" not in client.get(sub.get_absolute_url()).content.decode()  # one so far
    worker.finish(second, make_result(second))
    live = client.get(f"/submissions/{sub.pk}/status/").content.decode()
    assert "bitwise identical on every hardware it ran on</span> (cpu, h200x2)" in live


def test_errors_are_stated_plainly(client, judged, user, problem, cpu):
    ev = judged(user, problem, cpu, status="compile_error")
    client.force_login(user)
    body = client.get(f"/submissions/{ev.submission_id}/").content.decode()
    assert "Did not compile" in body and "compile_error on rank 1" in body and "data-rank>1 of 2" in body


def test_rejected_is_explained(client, judged, user, problem, cpu):
    from submissions.services import reject

    ev = judged(user, problem, cpu)
    reject([ev.submission_id], "reads the reference output")
    body = client.get(f"/submissions/{ev.submission_id}/").content.decode()
    assert "Hidden from the leaderboards by an admin: reads the reference output" in body


def test_infrastructure_failure(client, submit, user, problem, cpu):
    from submissions.models import Evaluation

    sub = submit(user, problem, cpu)
    Evaluation.objects.filter(submission=sub).update(state="failed", stage="done", attempts=3, reason="GPU lost")
    body = client.get(f"/submissions/{sub.pk}/").content.decode()
    assert "could not evaluate this" in body and "GPU lost" not in body  # the host's trouble: for the owner
    client.force_login(user)
    assert "GPU lost" in client.get(f"/submissions/{sub.pk}/").content.decode()


def test_my_submissions(client, submit, user, other_user, problem, cpu):
    submit(user, problem, cpu)
    submit(other_user, problem, cpu)
    client.force_login(user)
    response = client.get("/submissions/")
    assert [s.owner for s in response.context["submissions"]] == [user]


def test_unknown_submission_is_404(client, db):
    assert client.get("/submissions/999/").status_code == 404


def test_reruns_are_labelled(client, judged, broker, worker, make_result, user, problem, cpu):
    from submissions.services import queue_evaluations

    first = judged(user, problem, cpu)
    [rerun] = queue_evaluations([first.submission], cpu)
    broker.enqueue(rerun.pk)

    def headings():
        body = client.get(f"/submissions/{first.submission_id}/").content.decode()
        return [body.split(f'id="evaluation-{ev.pk}"')[1].split("</h2>")[0] for ev in (first, rerun)]

    original, again = headings()
    assert "rerun" not in original and 'class="badge rerun">rerun<' in again
    client.force_login(user)
    mine = client.get("/submissions/").content.decode()
    assert "cpu: correct" in mine and "cpu rerun: queued" in mine

    worker.finish(rerun, make_result(rerun))
    original, again = headings()
    assert "replaced by a later run" in original and "replaced" not in again


def test_a_shape_whose_timed_calls_allocated_device_memory_says_so(client, submit, worker, make_result, user,
                                                                     problem, cpu):
    sub = submit(user, problem, cpu)
    ev = sub.evaluations.get()
    doc = make_result(ev, speedups=(1.0, 1.0, 1.0))
    doc["shapes"][1]["timing_run"]["allocator"] = {
        "reference": {"device_allocs": [0, 0], "device_frees": [0, 0], "retries": [0, 0]},
        "solution": {"device_allocs": [4, 3], "device_frees": [4, 2], "retries": [0, 1]}}
    doc["shapes"][2]["timing_run"]["allocator"] = {
        side: {"device_allocs": [0, 0], "device_frees": [0, 0], "retries": [0, 0]} for side in ("reference", "solution")}
    worker.finish(ev, doc)
    [view] = client.get(f"/submissions/{sub.pk}/").context["evaluations"]
    notes = {s["name"]: s["notes"] for s in view["shapes"]}
    assert notes["small"] == [] and notes["large"] == []  # none recorded, and none made
    assert notes["default"] == [
        "During the timed calls, the solution's CUDA allocator took memory from the device 7 times, gave it back "
        "6 times and retried 1 times; the reference's CUDA allocator took memory from the device 0 times, gave it "
        "back 0 times and retried 0 times (each such call can cost milliseconds inside the clock)."]
    assert "the solution&#x27;s CUDA allocator took memory from the device 7 times" in client.get(
        f"/submissions/{sub.pk}/status/").content.decode()
