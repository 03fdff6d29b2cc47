"""Where a generated solution came from, read from the public suite's layout:
`solutions_<backend>_<precision>_<hardware|none>_<provider>_<model>/<id>_<name>_<backend>.py`.

The hardware key may itself contain underscores (`h100_8`) and the model slug too
(`zai-org_GLM-5.1`), so the provider, from a known list, anchors the split.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

PROVIDERS = ("google", "together", "anthropic", "openai", "deepseek", "xai", "mistral", "meta", "local", "human")
BACKEND_ALIASES = {
    "cuda": "cuda",
    "parallelkittens": "cuda",
    "tk": "cuda",
    "triton": "triton",
    "pytorch": "pytorch",
    "torch": "pytorch",
}
FILE_NAME = re.compile(r"^(?P<id>\d+)_(?P<name>.+)_(?P<backend>[A-Za-z0-9]+)\.py$")


@dataclass(frozen=True)
class RunDirectory:
    backend: str
    precision: str
    hardware: str
    provider: str
    model: str


@dataclass(frozen=True)
class SolutionFile:
    path: Path
    pkb_id: int | None
    name: str
    backend: str


def parse_run_directory(name: str) -> RunDirectory | None:
    parts = name.split("_")
    if len(parts) < 6 or parts[0] != "solutions":
        return None
    backend, precision, rest = parts[1], parts[2], parts[3:]
    for i in range(1, len(rest) - 1):  # the hardware takes at least one part, the model at least one
        if rest[i] in PROVIDERS:
            return RunDirectory(backend, precision, "_".join(rest[:i]), rest[i], "_".join(rest[i + 1 :]))
    return RunDirectory(backend, precision, rest[0], rest[1], "_".join(rest[2:]))


def parse_solution_file(path: Path) -> SolutionFile | None:
    match = FILE_NAME.match(path.name)
    if not match:
        return None
    return SolutionFile(path, int(match["id"]), match["name"], platform_backend(match["backend"]))


def platform_backend(name: str) -> str:
    return BACKEND_ALIASES.get(name.lower(), "cuda")
