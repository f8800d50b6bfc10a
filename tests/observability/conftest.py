"""A GitLab simulator with the harness's project, as the API tests have it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
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
