"""Fixtures of the agent integration tests: the agent's token and the simulator."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from agent_world import AGENT_TOKEN, AGENT_TOKEN_ENV, new_simulator

from workqueue.testing.gitlab_simulator import GitLabSimulator


@pytest.fixture(autouse=True)
def agent_token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(AGENT_TOKEN_ENV, AGENT_TOKEN)


@pytest.fixture
def simulator() -> Iterator[GitLabSimulator]:
    simulator = new_simulator()
    try:
        yield simulator
    finally:
        simulator.stop()
