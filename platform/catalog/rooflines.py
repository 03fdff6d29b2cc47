"""Rooflines for the problem page: T_roof and the bound resource per shape, for every hardware
profile (evaluator/hardware.toml) and for each of this platform's GPU hardware (with the
admin-editable numbers stored on its row), next to that hardware's best result shape by shape.

The roofline models GPUs: HBM, tensor cores, NVLink. Hardware whose ranks are CPU processes (or
share one GPU) has none: its results are shown without one, and the page says why."""

from __future__ import annotations

from dataclasses import dataclass, field

import tasks
from catalog.models import Hardware, Problem, world_size_for
from evaluator.roofline import HardwareProfile, profiles, roofline
from submissions.models import Evaluation


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


@dataclass(frozen=True)
class ShapeRow:
    """One shape on one hardware: its roofline there (None where the roofline does not apply) and the
    hardware's best result at that shape (None before any)."""

    name: str
    dims: str
    default: bool
    t_roof_us: float | None = None
    bound: str | None = None
    solution_us: float | None = None
    reference_us: float | None = None
    speedup: float | None = None

    @property
    def utilization(self) -> float | None:
        if self.t_roof_us is None or not self.solution_us:
            return None
        return self.t_roof_us / self.solution_us


@dataclass
class HardwareResults:
    """A hardware's section of the problem page: its roofline and best result, shape by shape."""

    hardware: Hardware
    world_size: int
    best: Evaluation | None
    shapes: list[ShapeRow] = field(default_factory=list)

    @property
    def has_roofline(self) -> bool:
        return self.hardware.has_roofline


def _cells(spec, world_size: int, profile: HardwareProfile) -> list[RooflineCell]:
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
        ProfileRow(profile, ws, _cells(spec, ws, profile))
        for profile in profiles().values()
        for ws in sorted(problem.world_sizes or spec.world_sizes)
    ]


def _dims(dims: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in dims.items())


def hardware_results(
    problem: Problem, hardware: list[Hardware], best: dict[int, Evaluation | None]
) -> list[HardwareResults]:
    """For each hardware: the problem's shapes with the roofline there and its best result (`best`:
    hardware id -> the leaderboard's first evaluation, or None). Utilization is T_roof over the
    measured time, against this hardware's roofline: the one shown beside it."""
    spec = tasks.problems().get(problem.slug)
    ids = [ev.pk for ev in best.values() if ev is not None]
    documents = dict(Evaluation.objects.filter(pk__in=ids).values_list("pk", "result"))
    sections = []
    for hw in hardware:
        ev = best.get(hw.pk)
        measured = {s.get("name"): s for s in ((documents.get(ev.pk) if ev else None) or {}).get("shapes") or []}
        section = HardwareResults(hw, ev.world_size if ev else world_size_for(problem, hw), ev)
        roofs = {}
        if hw.has_roofline and spec is not None:  # at the world size the result ran at
            roofs = {c.shape: c for c in _cells(spec, section.world_size, hw.roofline_profile())}
        for shape in problem.shapes:
            roof = roofs.get(shape["name"])
            result = measured.get(shape["name"]) or {}
            section.shapes.append(
                ShapeRow(
                    name=shape["name"],
                    dims=_dims(shape.get("dims") or {}),
                    default=bool(shape.get("default")),
                    t_roof_us=roof.t_roof_us if roof else None,
                    bound=str(roof.bound) if roof else None,
                    solution_us=(result.get("solution") or {}).get("time_us"),
                    reference_us=(result.get("reference") or {}).get("time_us"),
                    speedup=result.get("speedup"),
                )
            )
        sections.append(section)
    return sections
