"""Fixtures of the security review reproductions: OIDC issuer, simulator, projects."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from mr_harness import TOKEN
from scoping_support import FILES, OWN, VICTIM

from workqueue.testing.gitlab_simulator import GitLabSimulator


@pytest.fixture
def simulator() -> Iterator[GitLabSimulator]:
    simulator = GitLabSimulator(token=TOKEN)
    simulator.start()
    try:
        yield simulator
    finally:
        simulator.stop()


@pytest.fixture
def projects(simulator: GitLabSimulator) -> dict[str, int]:
    return {path: simulator.create_project(path, FILES) for path in (OWN, VICTIM)}
