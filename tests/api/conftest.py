"""Fixtures for API tests: a simulator with a project, and a live app on a fresh database."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from api_harness import build_client
from mr_harness import FILES, PROJECT, TOKEN

from workqueue.testing.gitlab_simulator import GitLabSimulator


@pytest.fixture
def simulator() -> Iterator[GitLabSimulator]:
    simulator = GitLabSimulator(token=TOKEN)
    simulator.start()
    simulator.create_project(PROJECT, FILES)
    try:
        yield simulator
    finally:
        simulator.stop()
    assert simulator.errors == []


@pytest.fixture
def client(database_url, simulator):
    with build_client(database_url, simulator) as test_client:
        yield test_client
