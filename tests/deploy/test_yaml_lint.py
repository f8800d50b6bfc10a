"""Every YAML file we own for deployment and docs passes yamllint with the repository's config."""

from __future__ import annotations

from pathlib import Path

import pytest
from yamllint import linter
from yamllint.config import YamlLintConfig

ROOT = Path(__file__).resolve().parents[2]
LINTED = [
    *sorted((ROOT / "deploy").rglob("*.yaml")),
    *sorted((ROOT / "deploy").rglob("*.yml")),
    ROOT / "mkdocs.yml",
    ROOT / ".yamllint",
]


@pytest.fixture(scope="module")
def config() -> YamlLintConfig:
    return YamlLintConfig(file=str(ROOT / ".yamllint"))


def test_there_is_something_to_lint():
    assert len(LINTED) > 15
    assert all(path.is_file() for path in LINTED)


@pytest.mark.parametrize("path", LINTED, ids=lambda path: str(path.relative_to(ROOT)))
def test_yamllint_reports_nothing(path, config):
    problems = [
        f"{path.relative_to(ROOT)}:{problem.line}:{problem.column}: {problem.desc} ({problem.rule})"
        for problem in linter.run(path.read_text(encoding="utf-8"), config, str(path))
    ]
    assert problems == []


def test_the_config_catches_a_real_problem(config):
    problems = list(linter.run("key: value\nkey: other\n", config))
    assert [problem.rule for problem in problems] == ["key-duplicates"]
