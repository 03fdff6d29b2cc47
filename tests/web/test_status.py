"""The live status partial: polls every 2 s while anything runs, stops with 286 once all finished."""

import pytest

pytestmark = pytest.mark.django_db


def test_progresses_through_the_stages_then_stops_polling(client, submit, worker, make_result, user, problem, cpu):
    sub = submit(user, problem, cpu)
    ev = sub.evaluations.get()
    url = f"/submissions/{sub.pk}/status/"

    response = client.get(url, headers={"HX-Request": "true"})
    body = response.content.decode()
    assert response.status_code == 200 and 'hx-trigger="every 2s"' in body
    assert "Waiting in the queue: position 1" in body

    for stage in ("starting", "building", "checking", "timing"):
        worker.stage(ev, stage)
        body = client.get(url).content.decode()
        shown = "building" if stage == "starting" else stage
        assert f'data-stage="{stage}"' in body and f'class="current">{shown}<' in body
        assert 'hx-trigger="every 2s"' in body

    worker.finish(ev, make_result(ev))
    response = client.get(url)
    body = response.content.decode()
    assert response.status_code == 286
    assert "hx-trigger" not in body and "Correct" in body and "data-chart" in body


def test_queue_position_counts_earlier_evaluations(client, submit, user, other_user, problem, cpu):
    submit(other_user, problem, cpu)
    mine = submit(user, problem, cpu)
    assert "position 2" in client.get(f"/submissions/{mine.pk}/status/").content.decode()


def test_full_page_embeds_the_polling_element_only_while_live(client, judged, submit, user, problem, cpu):
    live = submit(user, problem, cpu)
    assert 'hx-trigger="every 2s"' in client.get(f"/submissions/{live.pk}/").content.decode()
    done = judged(user, problem, cpu)
    assert "hx-trigger" not in client.get(f"/submissions/{done.submission_id}/").content.decode()


def test_says_which_workers_serve_the_hardware_and_when_none_does(client, submit, user, problem, cpu, h200):
    from datetime import timedelta

    from django.utils import timezone

    from dispatch.models import WorkerPresence
    from dispatch.tasks import worker_alive

    sub = submit(user, problem, h200)
    url = f"/submissions/{sub.pk}/status/"
    body = client.get(url).content.decode()
    assert "No worker is serving this hardware</strong> (h200x4)" in body and "position 1 of 1" in body

    worker_alive("gpu-h200x4@host-a", "h200x4", True, 30.0)  # what a worker sends when ready, then periodically
    worker_alive("gpu-cpu@host-b", "cpu", True, 30.0)  # another hardware's
    body = client.get(url).content.decode()
    assert "No worker is serving" not in body and "Served by gpu-h200x4@host-a (idle)." in body

    # Silent for three announcement periods: killed, or its host is down.
    WorkerPresence.objects.filter(name="gpu-h200x4@host-a").update(last_seen=timezone.now() - timedelta(seconds=91))
    assert "No worker is serving this hardware" in client.get(url).content.decode()

    worker_alive("gpu-h200x4@host-a", "h200x4", True, 30.0)
    assert "Served by gpu-h200x4@host-a" in client.get(url).content.decode()
    worker_alive("gpu-h200x4@host-a", "h200x4", False, 30.0)  # it stopped
    assert "No worker is serving this hardware" in client.get(url).content.decode()


def test_a_worker_running_this_hardware_counts_as_serving_it(client, submit, worker, user, other_user, problem, cpu):
    running = submit(other_user, problem, cpu).evaluations.get()
    worker.stage(running, "starting")  # a worker that does not announce itself, but heartbeats
    waiting = submit(user, problem, cpu)
    body = client.get(f"/submissions/{waiting.pk}/status/").content.decode()
    assert f"Served by test-worker (running evaluation #{running.pk})." in body
    assert "position 1 of 1" in body  # the running one left the queue


def test_the_api_says_whether_a_worker_serves_the_queue(client, submit, user, problem, cpu):
    from dispatch.tasks import worker_alive

    sub = submit(user, problem, cpu)
    [ev] = client.get(f"/api/submissions/{sub.pk}").json()["evaluations"]
    assert (ev["state"], ev["workers"], ev["run"]) == ("queued", [], 1)
    worker_alive("gpu-cpu@host", "cpu", True, 30.0)
    [ev] = client.get(f"/api/submissions/{sub.pk}").json()["evaluations"]
    assert ev["workers"] == ["gpu-cpu@host"]
    [cpu_out] = [hw for hw in client.get("/api/hardware").json() if hw["slug"] == "cpu"]
    assert (cpu_out["queued"], cpu_out["workers"]) == (1, ["gpu-cpu@host"])
