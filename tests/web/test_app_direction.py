"""The web apps depend on each other in one direction: an app imports only apps of lower layers,
so nothing knows what is built on top of it. Every module under platform/ is read with `ast`:
imports at any depth (inside functions too) and import_module / import_string calls that name a
module outright count."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

# Lowest first. An app may import the apps of lower layers; apps of one layer import none of each other.
LAYERS = (
    ("pkbcli",),  # the API client, which stands alone
    ("common",),  # what every page and the API share: charts, query parameters, middleware, text, tags
    ("catalog",),  # problems and hardware
    ("submissions",),  # submissions, their evaluations, model names
    ("leaderboards", "dispatch", "casestudies", "accounts"),  # ranking, the GPU queues, case studies, accounts
    ("pages", "api"),  # the HTML pages and the admin; the JSON API
    ("pkb_site",),  # the project: settings, URLs, WSGI, Celery
)

PLATFORM = Path(__file__).resolve().parents[2] / "platform"
LAYER = {app: level for level, apps in enumerate(LAYERS) for app in apps}
DYNAMIC_IMPORTS = ("import_module", "import_string")


def packages() -> set[str]:
    return {p.parent.name for p in PLATFORM.glob("*/__init__.py")}


def imported_modules(tree: ast.AST):
    """(line, absolute module name) of every import in the tree, nested ones included."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.lineno, node.module
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)
            if name in DYNAMIC_IMPORTS and isinstance(node.args[0].value, str):
                yield node.lineno, node.args[0].value


def app_imports() -> list[tuple[str, str, str]]:
    """(importing app, imported app, where) for every import of one platform app by another."""
    apps = packages()
    found = []
    for path in sorted(PLATFORM.rglob("*.py")):
        source = path.relative_to(PLATFORM).parts[0]
        if source not in apps:
            continue
        for line, module in imported_modules(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            target = module.split(".")[0]
            if target in apps and target != source:
                found.append((source, target, f"{path.relative_to(PLATFORM.parent)}:{line} imports {module}"))
    return found


def test_every_app_has_a_layer():
    assert packages() == set(LAYER), "declare each app of platform/ in LAYERS, and only those"


def test_apps_import_only_lower_layers():
    # An app missing from LAYERS fails test_every_app_has_a_layer.
    declared = [(s, t, where) for s, t, where in app_imports() if s in LAYER and t in LAYER]
    against = [where for source, target, where in declared if LAYER[target] >= LAYER[source]]
    assert not against, "imports against the layer order:\n" + "\n".join(against)


def test_no_cycles_between_apps():
    graph: dict[str, set[str]] = defaultdict(set)
    for source, target, _ in app_imports():
        graph[source].add(target)
    cycles = []

    def visit(app: str, path: list[str]) -> None:
        for nxt in sorted(graph[app]):
            if nxt == path[0]:
                cycles.append(" -> ".join([*path, nxt]))
            elif nxt not in path and nxt > path[0]:  # each cycle once, from its smallest app
                visit(nxt, [*path, nxt])

    for app in sorted(graph):
        visit(app, [app])
    assert not cycles, "cycles between apps:\n" + "\n".join(cycles)
