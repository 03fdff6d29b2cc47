import json

import pytest

pytestmark = pytest.mark.django_db


def test_two_hardware_side_by_side(client, judged, user, problem, other_problem, cpu, h200):
    judged(user, problem, cpu, speedups=(2, 2, 2), model_tag="gpt")
    judged(user, problem, h200, status="runtime_error", model_tag="gpt")
    judged(user, other_problem, cpu, status="incorrect", model_tag="glm")
    response = client.get("/compare/models/?hardware=cpu&hardware_b=h200x4")
    assert response.status_code == 200
    left, right = response.context["panels"]
    assert left["comparison"].hardware == cpu and right["comparison"].hardware == h200
    assert [s.model for s in left["comparison"].scores] == ["gpt", "glm"]
    assert right["comparison"].scores[0].failures["runtime_error"] == 1
    fast = left["fast_curves"]["chart"]
    # gpt's curve drops at p = 2 (its speedup), glm's is flat: drawn around p = 2 only
    assert fast["data"]["labels"] == [1.8, 1.9, 2.0, 2.1]
    assert fast["data"]["datasets"][0]["data"][0] == pytest.approx(0.5)  # gpt: 1 of 2 problems correct
    body = response.content.decode()
    # cpu: fast_p and failures (roof_u does not apply there); h200x4: failures, and fast_p and roof_u
    # flat at 0 (its one run crashed), so listed in tables rather than drawn as flat lines
    assert body.count("<canvas") == 3 and body.count("data-flat") == 2 and "data-no-roofline" in body
    assert right["fast_curves"]["flat"] == [("gpt", 0.0)]
    chart = json.loads(body.split('id="fast-chart-0" type="application/json">')[1].split("</script>")[0])
    assert chart["type"] == "line"
    assert "pass@1" in body and "fast_1@1" in body and "level 2" in body


def test_level_and_model_filters(client, judged, user, problem, other_problem, cpu):
    judged(user, problem, cpu, model_tag="gpt")
    judged(user, other_problem, cpu, model_tag="glm")
    response = client.get("/compare/models/?hardware=cpu&level=2")
    [panel] = response.context["panels"]
    assert panel["comparison"].n_problems == 1 and [s.model for s in panel["comparison"].scores] == ["glm"]
    response = client.get("/compare/models/?hardware=cpu&models=gpt")
    assert [s.model for s in response.context["panels"][0]["comparison"].scores] == ["gpt"]


def test_no_results(client, cpu):
    response = client.get("/compare/models/")
    assert response.status_code == 200 and "No finished evaluations" in response.content.decode()
    assert client.get("/compare/models/?hardware=nope").status_code == 404


def test_fast_p_carries_its_bootstrap_interval(client, judged, user, problem, other_problem, cpu):
    judged(user, problem, cpu, speedups=(2, 2, 2), model_tag="gpt")
    judged(user, other_problem, cpu, status="incorrect", model_tag="gpt")
    [gpt] = client.get("/compare/models/?hardware=cpu").context["panels"][0]["comparison"].scores
    assert gpt.fast_1 == pytest.approx(0.5)
    low, high = gpt.fast_1_interval
    assert low == 0.0 and high == 1.0  # two problems, one solved: a draw can hold either twice
    [row] = client.get("/api/compare/models?hardware=cpu").json()["models"]
    assert row["fast_1_interval"] == [0.0, 1.0] and row["fast_0_interval"] == [0.0, 1.0]
    assert "95% bootstrap interval over problems" in client.get("/compare/models/?hardware=cpu").content.decode()
