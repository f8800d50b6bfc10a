"""The layers, held by the import graph: through any path, with no import circles.

grimp (import-linter's graph) reads every import of the package, at module
level, inside functions and behind `TYPE_CHECKING` alike, so a rule broken
through a chain of modules is reported with that chain.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

import grimp
import pytest

import workqueue.queue

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "workqueue"

HTTP_AND_CLIENTS = ("httpx", "requests", "urllib3", "gitlab", "fastapi", "starlette", "uvicorn")
EVERYTHING_ABOVE_THE_ENGINE = (
    "workqueue.types",
    "workqueue.gitlab",
    "workqueue.api",
    "workqueue.cli",
    "workqueue.auth",
    "workqueue.notifications",
    "workqueue.receivers",
    "workqueue.ui",
    "workqueue.attention",
    "workqueue.observability",
    "workqueue.signals",
    "workqueue.testing",
)

# importer package -> what it must not reach, by any path. `workqueue.db.migrations`
# is no package (Alembic loads its files by path): its env.py assembles the whole
# schema, which is its job, and is outside this graph.
RULES: Mapping[str, tuple[str, ...]] = {
    "workqueue.queue": (*EVERYTHING_ABOVE_THE_ENGINE, *HTTP_AND_CLIENTS),
    "workqueue.db": ("workqueue.queue", *EVERYTHING_ABOVE_THE_ENGINE, *HTTP_AND_CLIENTS),
    # The adapter implements the engine's error contract (queue.errors), nothing more.
    "workqueue.gitlab": (
        "workqueue.queue.processing",
        "workqueue.types",
        "workqueue.api",
        "workqueue.cli",
        "workqueue.auth",
        "workqueue.receivers",
        "workqueue.notifications",
        "workqueue.attention",
        "workqueue.ui",
    ),
    "workqueue.auth": (
        "workqueue.queue",
        "workqueue.types",
        "workqueue.gitlab",
        "workqueue.api",
        "workqueue.cli",
        "workqueue.ui",
    ),
    "workqueue.attention": ("workqueue.types", "workqueue.api", "workqueue.cli", "workqueue.ui"),
    "workqueue.notifications": ("workqueue.types", "workqueue.api", "workqueue.cli"),
    "workqueue.observability": ("workqueue.types", "workqueue.api", "workqueue.cli"),
    "workqueue.types": ("workqueue.cli", "workqueue.ui", "workqueue.testing"),
    # The signal store sits beside the engine: types read it, it knows no type.
    "workqueue.signals": (
        "workqueue.types",
        "workqueue.api",
        "workqueue.cli",
        "workqueue.ui",
        *HTTP_AND_CLIENTS,
    ),
    "workqueue.api": ("workqueue.cli", "workqueue.testing"),
}


def build_graph(package: str) -> grimp.ImportGraph:
    return grimp.build_graph(package, include_external_packages=True, cache_dir=None)


def broken_rules(graph: grimp.ImportGraph, rules: Mapping[str, Iterable[str]]) -> list[str]:
    """Each forbidden reach as `importer -> ... -> imported`: its shortest chain."""
    broken = []
    for importer, forbidden in rules.items():
        for imported in forbidden:
            if imported not in graph.modules:
                continue
            chains = graph.find_shortest_chains(
                importer=importer, imported=imported, as_packages=True
            )
            broken.extend(" -> ".join(chain) for chain in sorted(chains))
    return broken


def import_cycles(graph: grimp.ImportGraph, package: str) -> list[list[str]]:
    """Each import circle of the package, as its sorted modules: an import a -> b is in one
    when b leads back to a."""
    cycles: set[tuple[str, ...]] = set()
    for importer in graph.modules:
        if importer != package and not importer.startswith(package + "."):
            continue
        for imported in graph.find_modules_directly_imported_by(importer):
            back = graph.find_shortest_chain(importer=imported, imported=importer)
            if back is not None:
                cycles.add(tuple(sorted(back)))
    return [list(cycle) for cycle in sorted(cycles)]


def engine_imports_outside_its_surface(types_dir: Path, surface: Iterable[str]) -> list[str]:
    """Imports of the engine by a type that skip `workqueue.queue` or its `__all__`."""
    exported = set(surface)
    found = []
    for path in sorted(types_dir.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        where = path.relative_to(types_dir.parent)
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                found.extend(
                    f"{where} imports {alias.name}"
                    for alias in node.names
                    if alias.name.startswith("workqueue.queue")
                )
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                if node.module.startswith("workqueue.queue."):
                    found.append(f"{where} imports {node.module}")
                elif node.module == "workqueue.queue":
                    found.extend(
                        f"{where} imports workqueue.queue.{alias.name} (not in __all__)"
                        for alias in node.names
                        if alias.name not in exported
                    )
    return found


@pytest.fixture(scope="module")
def graph():
    return build_graph("workqueue")


def test_each_layer_reaches_nothing_above_it_by_any_path(graph):
    assert broken_rules(graph, RULES) == []


def test_the_package_has_no_import_circles(graph):
    assert import_cycles(graph, "workqueue") == []


def test_only_the_types_own_packages_reach_a_type(graph):
    """The app, the dashboard, the runtime and the CLI know types through the catalog's
    plugins: a new type is one line there, not an import here and there."""
    type_packages = sorted(
        path.name for path in (PACKAGE / "types").iterdir() if (path / "plugin.py").is_file()
    )
    assert {"mr", "trunk"} <= set(type_packages)
    outside = ("workqueue.api", "workqueue.ui", "workqueue.cli", "workqueue.runtime")
    rules = {
        importer: tuple(f"workqueue.types.{name}" for name in type_packages) for importer in outside
    }
    assert broken_rules(graph, rules) == []


def test_types_use_the_engine_only_through_its_surface():
    assert engine_imports_outside_its_surface(PACKAGE / "types", workqueue.queue.__all__) == []


def test_the_surface_exports_only_what_exists():
    missing = [name for name in workqueue.queue.__all__ if not hasattr(workqueue.queue, name)]
    assert missing == []


# -- the checkers themselves, on a throwaway package ---------------------------


@pytest.fixture
def throwaway(tmp_path, monkeypatch):
    """Writes modules of a package `pkg` under tmp_path and builds its graph."""

    def build(modules: Mapping[str, str]) -> grimp.ImportGraph:
        root = tmp_path / "pkg"
        root.mkdir(exist_ok=True)
        (root / "__init__.py").write_text("")
        for name, source in modules.items():
            (root / f"{name}.py").write_text(source + "\n", encoding="utf-8")
        monkeypatch.syspath_prepend(str(tmp_path))
        return build_graph("pkg")

    yield build
    for name in [module for module in sys.modules if module == "pkg" or module.startswith("pkg.")]:
        del sys.modules[name]


@pytest.mark.parametrize(
    "source_of_a",
    [
        "import pkg.b",
        "from pkg import b",
        "from pkg.b import thing",
        "from . import b",
        "def later():\n    import pkg.b",
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.b import thing",
    ],
)
def test_the_rule_checker_follows_every_import_form_through_a_chain(throwaway, source_of_a):
    graph = throwaway({"a": source_of_a, "b": "thing = 1\nimport pkg.c", "c": ""})
    assert broken_rules(graph, {"pkg.a": ("pkg.c",)}) == ["pkg.a -> pkg.b -> pkg.c"]
    assert broken_rules(graph, {"pkg.c": ("pkg.a",)}) == []


def test_the_cycle_checker_finds_circles_hidden_in_functions(throwaway):
    graph = throwaway(
        {
            "a": "import pkg.b",
            "b": "def later():\n    import pkg.c",
            "c": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import pkg.a",
            "d": "import pkg.a",
        }
    )
    assert import_cycles(graph, "pkg") == [["pkg.a", "pkg.b", "pkg.c"]]


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("from workqueue.queue import TypeRegistry", []),
        (
            "from workqueue.queue import secret_thing",
            ["t/x.py imports workqueue.queue.secret_thing (not in __all__)"],
        ),
        ("from workqueue.queue.models import Phase", ["t/x.py imports workqueue.queue.models"]),
        ("import workqueue.queue.enqueue", ["t/x.py imports workqueue.queue.enqueue"]),
        ("from workqueue.gitlab.client import GitLabClient", []),
    ],
)
def test_the_surface_checker_catches_each_import_form(tmp_path, source, expected):
    types_dir = tmp_path / "t"
    types_dir.mkdir()
    (types_dir / "x.py").write_text(source + "\n", encoding="utf-8")
    assert engine_imports_outside_its_surface(types_dir, ["TypeRegistry"]) == expected
