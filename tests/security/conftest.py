"""Fixtures of the security review reproductions: OIDC issuer, simulator, projects."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from attack_support import FILES, OWN, VICTIM
from auth_support import LocalIssuer, rsa_key
from mr_harness import TOKEN

from workqueue.testing.gitlab_simulator import GitLabSimulator


@pytest.fixture(scope="module")
def key():
    return rsa_key("attack-key")


@pytest.fixture
def issuer(key) -> Iterator[LocalIssuer]:
    server = LocalIssuer()
    server.publish(key)
    server.start()
    yield server
    server.stop()


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
