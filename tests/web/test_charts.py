"""Charts that read: a series with one value is a marked point (or a table), never a line; no line
is drawn through a missing value; fast_p and roof_u curves are drawn over the thresholds where they
change, and listed in a table when none changes."""

import json

import pytest

from common import charts


def test_a_single_value_is_a_marked_point_and_gaps_stay_gaps():
    config = charts.line([1, 2, 3], {"one": [None, 2.0, None], "three": [1.0, None, 3.0]}, "x", "y")
    one, three = config["data"]["datasets"]
    assert one["showLine"] is False and one["pointRadius"] >= 4
    assert "showLine" not in three and three["spanGaps"] is False  # no line across the missing middle


def test_curves_are_drawn_where_they_change():
    grid = [round(0.1 * i, 1) for i in range(31)]
    flat_then_drop = [0.5 if p < 2.0 else 0.0 for p in grid]
    view = charts.threshold_curves(grid, {"a": flat_then_drop, "b": [0.25] * 31}, "p", "fast_p", "p")
    assert view["chart"]["data"]["labels"] == [1.8, 1.9, 2.0, 2.1] and view["trimmed"]
    assert view["chart"]["data"]["datasets"][1]["data"] == [0.25] * 4
    assert "max" not in view["chart"]["options"]["scales"]["y"]  # 0.5 at most: the axis is not stretched to 1
    view = charts.threshold_curves(grid, {"a": [0.5] * 31, "b": [0.0] * 31}, "p", "fast_p", "p")
    assert view["chart"] is None and view["flat"] == [("a", 0.5), ("b", 0.0)]
    changing_everywhere = [1 - p / 3 for p in grid]
    view = charts.threshold_curves(grid, {"a": changing_everywhere}, "p", "fast_p", "p")
    assert view["chart"]["data"]["labels"] == grid and not view["trimmed"]


def chart_in(body: str, chart_id: str) -> dict:
    return json.loads(body.split(f'id="{chart_id}" type="application/json">')[1].split("</script>")[0])


@pytest.mark.django_db
def test_model_comparison_trims_flat_thresholds_and_lists_flat_curves(
    client, judged, user, problem, other_problem, cpu, h200
):
    judged(user, problem, cpu, speedups=(1.2, 1.2, 1.2), model_tag="gpt")
    judged(user, problem, h200, speedups=(5, 5, 5), model_tag="gpt")  # above every p of the grid: flat
    body = client.get("/compare/models/?hardware=cpu&hardware_b=h200x4").content.decode()
    fast = chart_in(body, "fast-chart-0")
    assert fast["data"]["labels"] == [1.0, 1.1, 1.2, 1.3]  # not the flat 0..1 and 1.3..3
    assert "data-trimmed" in body.split('id="fast-chart-0"')[1].split("</div>")[0]
    assert 'id="fast-chart-1"' not in body  # h200x4: fast_p is 50% at every p
    right = body.split("On h200x4")[1]
    flat = right.split("data-flat")[1].split("</table>")[0]
    assert "gpt" in flat and "50.0%" in flat


@pytest.mark.django_db
def test_one_shape_gets_no_line_over_shapes(client, judged, user, problem, cpu, h200):
    problem.shapes = [s for s in problem.shapes if s["default"]]
    problem.save()
    ev = judged(user, problem, h200, speedups=(2.0,))
    client.force_login(user)
    [view] = client.get(f"/submissions/{ev.submission_id}/").context["evaluations"]
    assert view["speedup_chart"] is None  # the table says it; one point is not a line
    assert view["roofline_chart"]["type"] == "bar"
    body = client.get(f"/submissions/{ev.submission_id}/").content.decode()
    assert f'data-chart="roofline-chart-{ev.pk}"' in body
