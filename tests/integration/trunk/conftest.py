"""Shared fixture of the trunk integration tests: a simulator with the project `group/app`."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from trunk_harness import new_simulator

from workqueue.testing.gitlab_simulator import GitLabSimulator


@pytest.fixture
def simulator() -> Iterator[GitLabSimulator]:
    simulator = new_simulator()
    try:
        yield simulator
    finally:
        simulator.stop()
    assert simulator.errors == []
