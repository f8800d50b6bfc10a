"""The chaos suite's plumbing: sizes, fixtures and the one-line-per-scenario report.

`pytest -q` (and so `make test`) runs the short versions of scenarios 1, 2 and 4.
`make chaos` sets WORKQUEUE_CHAOS=full: every scenario at the issue's sizes. Each
scenario ends with `scenario: PASS|FAIL figure=value ...`, and the run with
`chaos: N passed, M failed`, printed in the terminal summary (so also under -q).
"""

from __future__ import annotations

import os
import random
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from invariants import Verdict
from replicas import ChaosDatabase
from sizes import FULL, SEED
from workload import create_project

from workqueue.db.url import libpq_conninfo
from workqueue.testing.gitlab_simulator import GitLabSimulator

_lines: dict[str, str] = {}
_outcomes: dict[str, bool] = {}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Without WORKQUEUE_CHAOS=full, scenarios that exist only at full size are left out."""
    if FULL:
        return
    dropped = [item for item in items if item.get_closest_marker("chaos_full_only")]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = [item for item in items if item not in dropped]


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if "tests/chaos/" not in report.nodeid.replace(os.sep, "/"):
        return
    if report.when == "call" or report.failed:
        _outcomes[report.nodeid] = _outcomes.get(report.nodeid, True) and report.passed
        if report.failed and report.nodeid not in _lines:
            reason = str(report.longrepr).strip().splitlines()[-1:] or ["?"]
            _lines[report.nodeid] = f"{report.nodeid}: FAIL error={reason[0][:200]!r}"


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not _outcomes:
        return
    terminalreporter.section("chaos")
    for nodeid in _outcomes:
        terminalreporter.write_line(_lines.get(nodeid, f"{nodeid}: no report"))
    passed = sum(_outcomes.values())
    terminalreporter.write_line(f"chaos: {passed} passed, {len(_outcomes) - passed} failed")


@dataclass
class ScenarioReport:
    nodeid: str

    def finish(self, scenario: str, verdict: Verdict) -> None:
        """Record the scenario's line, then fail the test if any invariant broke."""
        status = "FAIL" if verdict.problems else "PASS"
        figures = " ".join(f"{name}={_text(value)}" for name, value in verdict.figures.items())
        line = f"{scenario}: {status} {figures}"
        _lines[self.nodeid] = line
        print(line)
        assert not verdict.problems, "; ".join(verdict.problems)


def _text(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.2f}"
    return str(value).replace(" ", "")


@pytest.fixture
def report(request: pytest.FixtureRequest) -> ScenarioReport:
    return ScenarioReport(request.node.nodeid)


@pytest.fixture
def rng() -> random.Random:
    return random.Random(SEED)  # noqa: S311 - chaos timing, not secrets


@pytest.fixture
def chaos_db() -> Iterator[ChaosDatabase]:
    database = ChaosDatabase()
    try:
        yield database
    finally:
        database.close()


@pytest.fixture
def conninfo(chaos_db: ChaosDatabase) -> str:
    return libpq_conninfo(chaos_db.url)


@pytest.fixture
def simulator() -> Iterator[GitLabSimulator]:
    with GitLabSimulator() as sim:
        create_project(sim)
        yield sim
