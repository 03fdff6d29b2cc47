"""The home page says what the platform is, draws the headline fast_p chart across models on the
default hardware, shows the newest results, and links every problem of the suite."""

import json
import re

import pytest

pytestmark = pytest.mark.django_db


def test_home_says_what_the_platform_is_with_the_headline_chart_and_newest_results(
    client, settings, judged, user, other_user, problem, other_problem, cpu, h200
):
    settings.PKB_DEFAULT_HARDWARE = "cpu"
    judged(user, problem, cpu, speedups=(1.5, 2, 3), model_tag="gpt")
    judged(other_user, problem, cpu, speedups=(1.1, 1.2, 1.3), model_tag="glm")
    judged(other_user, other_problem, cpu, status="incorrect", model_tag="glm")
    latest = judged(user, other_problem, h200, speedups=(4, 4, 4), model_tag="gpt")
    response = client.get("/")
    body = response.content.decode()
    assert "Multi-GPU kernels, judged on real GPUs" in body and "torch.distributed" in body

    headline = response.context["headline"]
    assert headline["hardware"] == cpu and {s.model for s in headline["comparison"].scores} == {"gpt", "glm"}
    chart = json.loads(body.split('id="home-fast-p" type="application/json">')[1].split("</script>")[0])
    assert {d["label"] for d in chart["data"]["datasets"]} == {"gpt", "glm"}
    assert chart["data"]["labels"][-1] < 3.0  # drawn where the curves change, not over the flat tail
    assert "/compare/models/?hardware=cpu" in body

    newest = response.context["newest"]
    assert len(newest) == 4 and newest[0]["pk"] == latest.pk
    table = body.split('class="newest-results"')[1].split("</table>")[0]
    assert f"/submissions/{latest.submission_id}/#evaluation-{latest.pk}" in table and "4.00×" in table
    assert "Wrong answer" in table and "h200x4" in table


def test_home_without_results_says_so(client, cpu):
    body = client.get("/").content.decode()
    assert "No model has a vouched result on cpu yet." in body and "Nothing judged yet." in body


def test_home_links_every_problem_of_the_suite(client, cpu):
    from catalog.models import Problem
    from catalog.sync import sync_problems

    sync_problems()
    active = set(Problem.objects.filter(active=True).values_list("slug", flat=True))
    assert len(active) > 80
    body = client.get("/").content.decode()
    linked = set(re.findall(r'href="/problems/([^/"]+)/"', body))
    assert active <= linked
    assert f"All {len(active)} problems" in body


def test_newest_results_put_those_without_a_finish_time_last(judged, user, problem, cpu):
    from django.db.models import F

    from leaderboards.ranking import current
    from pages.catalog import newest_results
    from submissions.models import Evaluation

    done = [judged(user, problem, cpu, sample_index=i) for i in range(6)]
    Evaluation.objects.filter(pk__in=[done[1].pk, done[4].pk]).update(finished_at=None)
    Evaluation.objects.filter(pk=done[0].pk).update(finished_at=done[5].finished_at)  # a tie: the higher id first
    for limit in (2, 4, 5, 8):
        want = current().filter(hidden=False).order_by(F("finished_at").desc(nulls_last=True), "-pk")[:limit]
        assert [r["pk"] for r in newest_results(limit)] == [ev.pk for ev in want]
