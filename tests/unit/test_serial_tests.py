"""Every entry of SERIAL in tests/conftest.py names tests that exist: after a rename, a
test that must run alone would otherwise go back among the parallel ones, silently."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
ROOT = TESTS.parent


def _serial_entries() -> list[str]:
    tree = ast.parse((TESTS / "conftest.py").read_text())
    [value] = [
        node.value
        for node in tree.body
        if isinstance(node, ast.Assign)
        and any(isinstance(target, ast.Name) and target.id == "SERIAL" for target in node.targets)
    ]
    return list(ast.literal_eval(value))


def test_every_serial_entry_names_an_existing_directory_file_or_test():
    entries = _serial_entries()
    assert entries
    for entry in entries:
        path, _, name = entry.partition("::")
        assert (ROOT / path).exists(), entry
        if name:
            assert f"def {name}(" in (ROOT / path).read_text(), entry
