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


def line(labels: list, series: dict[str, list], x_title: str, y_title: str, **axes) -> dict:
    return {
        "type": "line",
        "data": {
            "labels": labels,
            "datasets": [
                {
                    "label": name,
                    "data": values,
                    "borderColor": color(i),
                    "backgroundColor": color(i),
                    "tension": 0,
                    "pointRadius": 2,
                    "spanGaps": True,
                }
                for i, (name, values) in enumerate(series.items())
            ],
        },
        "options": {"animation": False, "responsive": True, "scales": _axes(x_title, y_title, **axes)},
    }


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
