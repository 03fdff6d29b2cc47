"""The example solutions under examples/solutions/ (listed in its examples.toml) that the problem
pages offer to load into the submit form: those that run without a GPU first."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from django.conf import settings

from evaluator.results import Mode

EXAMPLES_DIR = Path(settings.BASE_DIR) / "examples" / "solutions"
MODES = {m.value for m in Mode}


@dataclass(frozen=True)
class Example:
    slug: str  # the file name without .py: the submit page's ?example=
    file: str
    problem: str
    backend: str
    modes: tuple[str, ...]
    title: str

    @property
    def runs_on_cpu(self) -> bool:
        return Mode.CPU.value in self.modes

    @property
    def code(self) -> str:
        return (EXAMPLES_DIR / self.file).read_text(encoding="utf-8")

    def runs_on(self, hardware) -> bool:
        return hardware.mode in self.modes


@cache
def examples() -> tuple[Example, ...]:
    index = EXAMPLES_DIR / "examples.toml"
    if not index.exists():
        return ()
    found = []
    for entry in tomllib.loads(index.read_text(encoding="utf-8")).get("example", []):
        modes = tuple(entry["modes"])
        unknown = set(modes) - MODES
        if unknown:
            raise ValueError(f"{index}: {entry['file']}: unknown modes {sorted(unknown)}")
        found.append(
            Example(
                slug=Path(entry["file"]).stem,
                file=entry["file"],
                problem=entry["problem"],
                backend=entry["backend"],
                modes=modes,
                title=entry["title"],
            )
        )
    # Stable: within each group, the order of the file.
    return tuple(sorted(found, key=lambda e: not e.runs_on_cpu))


def for_problem(slug: str) -> list[Example]:
    return [e for e in examples() if e.problem == slug]


def get(slug: str) -> Example | None:
    return next((e for e in examples() if e.slug == slug), None)


def first_cpu_example() -> Example | None:
    return next((e for e in examples() if e.runs_on_cpu), None)
