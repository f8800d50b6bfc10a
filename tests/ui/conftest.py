"""Fixtures for dashboard tests: scoped callers with real tokens, projects, a live app."""

from __future__ import annotations

import shutil
from collections.abc import Iterator

import httpx
import pytest
from api_harness import build_client
from playwright.sync_api import Browser, sync_playwright
from scoping_support import ADMIN_SUB, FILES, OWN, TEAM_READER, VICTIM, scoped_rules, token

from workqueue.testing.gitlab_simulator import GitLabSimulator


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """Debian's Chromium driven by Playwright; without it the tests fail, never skip."""
    executable = shutil.which("chromium")
    assert executable is not None, "Debian's chromium package is needed (apt-get install chromium)"
    with sync_playwright() as playwright:
        # As root, Chromium's sandbox cannot start; the pages are our own.
        launched = playwright.chromium.launch(executable_path=executable, args=["--no-sandbox"])
        yield launched
        launched.close()


@pytest.fixture
def simulator() -> Iterator[GitLabSimulator]:
    simulator = GitLabSimulator(token="simulator-token")
    simulator.start()
    for project in (OWN, VICTIM):
        simulator.create_project(project, FILES)
    try:
        yield simulator
    finally:
        simulator.stop()
    assert simulator.errors == []


@pytest.fixture
def admin(issuer, key) -> dict[str, str]:
    return token(issuer, key, ADMIN_SUB)


@pytest.fixture
def reader(issuer, key) -> dict[str, str]:
    """May read team/** only, and retry nothing."""
    return token(issuer, key, TEAM_READER)


@pytest.fixture
def client(database_url, simulator, issuer) -> Iterator[httpx.Client]:
    """Tokens only (no local user); items are stored, not processed."""
    with build_client(
        database_url,
        simulator,
        local_user=None,
        rules=scoped_rules(issuer.issuer),
        process_items=False,
    ) as test_client:
        yield test_client
