"""Chart.js configurations built on the server; `static/pkb/charts.js` draws any canvas whose
`data-chart` names a json_script holding one of these."""

from __future__ import annotations

PALETTE = (
    "#2563eb",
    "#dc2626",
    "#16a34a",
    "#9333ea",
    "#ea580c",
    "#0891b2",
    "#ca8a04",
    "#db2777",
    "#4b5563",
    "#65a30d",
    "#7c3aed",
    "#0d9488",
)


def color(i: int) -> str:
    return PALETTE[i % len(PALETTE)]


def _axes(x_title: str, y_title: str, y_log: bool = False, y_max: float | None = None, x_linear: bool = False) -> dict:
    y = {"title": {"display": True, "text": y_title}, "type": "logarithmic" if y_log else "linear"}
    if not y_log:
        y["beginAtZero"] = True
    if y_max is not None:
        y["max"] = y_max
    x = {"title": {"display": True, "text": x_title}}
    if x_linear:
        x["type"] = "linear"
    return {"x": x, "y": y}


def _line_dataset(i: int, name: str, values: list) -> dict:
    dataset = {
        "label": name,
        "data": values,
        "borderColor": color(i),
        "backgroundColor": color(i),
        "tension": 0,
        "pointRadius": 2,
        # A missing value is a gap: no line is drawn through a point that was never measured.
        "spanGaps": False,
    }
    if sum(v is not None for v in values) == 1:  # one point is a point, marked, not a line
        dataset.update(showLine=False, pointRadius=5, pointHoverRadius=6)
    return dataset


def line(labels: list, series: dict[str, list], x_title: str, y_title: str, **axes) -> dict:
    return {
        "type": "line",
        "data": {
            "labels": labels,
            "datasets": [_line_dataset(i, name, values) for i, (name, values) in enumerate(series.items())],
        },
        "options": {"animation": False, "responsive": True, "scales": _axes(x_title, y_title, **axes)},
    }


def changing_span(grid: list, series: dict[str, list]) -> tuple[int, int] | None:
    """Indexes [lo, hi] of the grid around where some curve changes value, with one threshold of
    margin on each side (every curve is flat outside it); None when no curve changes at all."""
    changes = [i for i in range(1, len(grid)) if any(v[i] != v[i - 1] for v in series.values())]
    if not changes:
        return None
    return max(0, changes[0] - 2), min(len(grid) - 1, changes[-1] + 1)


def threshold_curves(grid, series: dict[str, list], x_name: str, y_name: str, x_title: str) -> dict:
    """Curves over a grid of thresholds (fast_p over p, roof_u over u), drawn where they change.

    Returns {"chart", "flat", "x", "y", "first", "last", "shown_first", "shown_last", "trimmed"}:
    `chart` is a line chart over the part of the grid where some curve changes (None when none
    does); `flat` lists (name, value) when every curve is flat, for a table instead of a chart of
    horizontal lines."""
    grid = list(grid)
    span = changing_span(grid, series)
    view = {"x": x_name, "y": y_name, "first": grid[0], "last": grid[-1], "chart": None, "flat": None}
    if span is None:
        view.update(flat=[(name, values[0] if values else None) for name, values in series.items()], trimmed=False)
        return view
    lo, hi = span
    view.update(
        # The y axis runs from 0 to just above the highest value (at most 1): a share of 1 in 90
        # problems on an axis up to 1 is a line on the floor.
        chart=line(grid[lo : hi + 1], {k: v[lo : hi + 1] for k, v in series.items()}, x_title, y_name),
        shown_first=grid[lo],
        shown_last=grid[hi],
        trimmed=(lo, hi) != (0, len(grid) - 1),
    )
    return view


def bar(labels: list, series: dict[str, list], x_title: str, y_title: str, stacked: bool = False, **axes) -> dict:
    scales = _axes(x_title, y_title, **axes)
    if stacked:
        scales["x"]["stacked"] = scales["y"]["stacked"] = True
    return {
        "type": "bar",
        "data": {
            "labels": labels,
            "datasets": [
                {"label": name, "data": values, "backgroundColor": color(i)}
                for i, (name, values) in enumerate(series.items())
            ],
        },
        "options": {"animation": False, "responsive": True, "scales": scales},
    }


def scatter(points: list[dict], x_title: str, y_title: str, label: str) -> dict:
    """points: [{"x", "y"}]; a y = x diagonal shows parity."""
    top = max([max(p["x"], p["y"]) for p in points] or [1.0]) * 1.1
    return {
        "type": "scatter",
        "data": {
            "datasets": [
                {"label": label, "data": points, "backgroundColor": color(0)},
                {
                    "label": "same speed",
                    "type": "line",
                    "data": [{"x": 0, "y": 0}, {"x": top, "y": top}],
                    "borderColor": "#9ca3af",
                    "pointRadius": 0,
                    "borderDash": [4, 4],
                },
            ]
        },
        "options": {
            "animation": False,
            "responsive": True,
            "scales": {
                "x": {"type": "linear", "title": {"display": True, "text": x_title}, "beginAtZero": True},
                "y": {"title": {"display": True, "text": y_title}, "beginAtZero": True},
            },
        },
    }
