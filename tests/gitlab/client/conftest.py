"""Fixtures for the GitLab client tests: a simulator with one project in a subgroup, and a
`GitLabClient` talking to it over real HTTP, recording its `on_call` reports."""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from gitlab_client_support import FILES, PROJECT, TIMEOUT, TOKEN, CallLog

from workqueue.gitlab import GitLabClient
from workqueue.testing.gitlab_simulator import GitLabSimulator


@pytest.fixture
def sim() -> Iterator[GitLabSimulator]:
    simulator = GitLabSimulator(token=TOKEN)
    simulator.start()
    try:
        yield simulator
    finally:
        simulator.stop()
    assert simulator.errors == [], "the simulator crashed while handling a request"


@pytest.fixture
def project_id(sim: GitLabSimulator) -> int:
    return sim.create_project(PROJECT, FILES)


@pytest.fixture
def calls() -> CallLog:
    return CallLog()


@pytest.fixture
def make_client(sim: GitLabSimulator) -> Iterator[Callable[..., GitLabClient]]:
    """Builds clients (other URLs, tokens, timeouts); all are closed after the test."""
    built: list[GitLabClient] = []

    def build(**options: Any) -> GitLabClient:
        url = options.pop("url", sim.url)
        token = options.pop("token", TOKEN)
        options.setdefault("timeout", TIMEOUT)
        client = GitLabClient(url, token, **options)
        built.append(client)
        return client

    yield build
    for client in built:
        client.close()


@pytest.fixture
def client(
    make_client: Callable[..., GitLabClient], project_id: int, calls: CallLog
) -> GitLabClient:
    return make_client(on_call=calls)


@pytest.fixture
def closed_port() -> int:
    """A local port nothing listens on (connection refused)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])
