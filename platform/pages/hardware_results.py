"""Each hardware's section of the problem page: the problem's shapes with the roofline on that
hardware (catalog.rooflines) next to its best result, shape by shape. Hardware whose ranks are CPU
processes (or share one GPU) has no roofline: its results are shown without one, and the page says why."""

from __future__ import annotations

from dataclasses import dataclass, field

import tasks
from catalog.models import Hardware, Problem, world_size_for
from catalog.rooflines import roofline_cells
from submissions.models import Evaluation


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
            roofs = {c.shape: c for c in roofline_cells(spec, section.world_size, hw.roofline_profile())}
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
