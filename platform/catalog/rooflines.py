"""Roofline tables for the problem page: T_roof and the bound resource per shape on each hardware,
with the (admin-editable) numbers stored on the Hardware rows."""

from __future__ import annotations

from dataclasses import dataclass

import tasks
from evaluator.roofline import roofline
from submissions.models import Hardware, Problem
from submissions.services import world_size_for


@dataclass(frozen=True)
class RooflineCell:
    shape: str
    t_roof_us: float
    bound: str


@dataclass(frozen=True)
class RooflineRow:
    hardware: Hardware
    world_size: int
    cells: list[RooflineCell]


def roofline_rows(problem: Problem, hardware: list[Hardware]) -> list[RooflineRow]:
    spec = tasks.problems().get(problem.slug)
    if spec is None:  # a problem no longer in the suite keeps its page, without a model to draw from
        return []
    rows = []
    for hw in hardware:
        ws = world_size_for(problem, hw)
        profile = hw.roofline_profile()
        cells = []
        for shape in spec.shapes:
            model = roofline(spec.phases(shape.dims, ws), profile)
            cells.append(RooflineCell(shape.name, model.t_roof_s * 1e6, model.bound))
        rows.append(RooflineRow(hw, ws, cells))
    return rows
