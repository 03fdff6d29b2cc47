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
