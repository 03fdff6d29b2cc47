"""Rooflines of a problem: T_roof and the bound resource per shape, on every hardware profile
(evaluator/hardware.toml) at each of its world sizes, or on one hardware (`roofline_cells`).

The roofline models GPUs: HBM, tensor cores, NVLink. Hardware whose ranks are CPU processes (or
share one GPU) has none."""

from __future__ import annotations

from dataclasses import dataclass

import tasks
from catalog.models import Problem
from evaluator.roofline import HardwareProfile, profiles, roofline


@dataclass(frozen=True)
class RooflineCell:
    shape: str
    t_roof_us: float
    bound: str


@dataclass(frozen=True)
class ProfileRow:
    """One hardware.toml profile at one world size."""

    profile: HardwareProfile
    world_size: int
    cells: list[RooflineCell]


def roofline_cells(spec, world_size: int, profile: HardwareProfile) -> list[RooflineCell]:
    """The problem's roofline on `profile` at `world_size`, shape by shape (`spec`: its tasks/ spec)."""
    cells = []
    for shape in spec.shapes:
        model = roofline(spec.phases(shape.dims, world_size), profile)
        cells.append(RooflineCell(shape.name, model.t_roof_s * 1e6, model.bound))
    return cells


def profile_rows(problem: Problem) -> list[ProfileRow]:
    """The roofline on every hardware profile the evaluator knows, at each of the problem's world sizes."""
    spec = tasks.problems().get(problem.slug)
    if spec is None:
        return []
    return [
        ProfileRow(profile, ws, roofline_cells(spec, ws, profile))
        for profile in profiles().values()
        for ws in sorted(problem.world_sizes or spec.world_sizes)
    ]
