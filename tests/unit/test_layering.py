"""The generic engine must not depend on item types or on the surfaces around it."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "workqueue"
FORBIDDEN_FOR_QUEUE = ("workqueue.types", "workqueue.gitlab", "workqueue.api", "workqueue.cli")


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    modules: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            modules.add(node.module)
            modules.update(f"{node.module}.{alias.name}" for alias in node.names)
    return modules


def violations(directory: Path, forbidden: tuple[str, ...]) -> list[str]:
    return [
        f"{path.relative_to(PACKAGE)} imports {module}"
        for path in sorted(directory.rglob("*.py"))
        for module in sorted(imported_modules(path))
        if module.startswith(forbidden)
    ]


def test_queue_imports_no_type_gitlab_http_or_cli_code():
    assert violations(PACKAGE / "queue", FORBIDDEN_FOR_QUEUE) == []


def test_db_adapter_imports_no_higher_layer():
    assert (
        violations(PACKAGE / "db", (*FORBIDDEN_FOR_QUEUE, "workqueue.queue.processing.manager"))
        == []
    )


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("import workqueue.types.mr", ["x.py imports workqueue.types.mr"]),
        (
            "from workqueue.api import app",
            ["x.py imports workqueue.api", "x.py imports workqueue.api.app"],
        ),
        ("from workqueue import gitlab", ["x.py imports workqueue.gitlab"]),
        ("from workqueue.queue import models", []),
    ],
)
def test_the_checker_catches_each_import_form(tmp_path, monkeypatch, source, expected):
    (tmp_path / "x.py").write_text(source + "\n", encoding="utf-8")
    monkeypatch.setattr(f"{__name__}.PACKAGE", tmp_path)
    assert violations(tmp_path, FORBIDDEN_FOR_QUEUE) == expected
