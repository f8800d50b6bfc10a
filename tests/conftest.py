"""Shared fixtures: one throwaway PostgreSQL cluster per test session.

The cluster runs with durability switched off (fsync, synchronous_commit,
full_page_writes) — fine for data that dies with the session, never for the
service. The schema is migrated once into a template database; each test that
needs storage gets a fresh copy (`CREATE DATABASE ... TEMPLATE`), made ahead and
dropped after by a thread of the session (`databases.DatabasePool`).
Set TEST_DATABASE_URL to use an external server instead of starting one.
Under pytest-xdist each worker is a session: its own cluster, template and temp dirs.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from databases import DatabasePool, admin_connection
from fastapi import FastAPI
from psycopg import sql
from sample_type import create_support_tables
from sqlalchemy.engine import URL, Engine
from sqlalchemy.orm import Session, sessionmaker
from starlette.applications import Starlette
from trust_store import share_default_trust_store

from workqueue.db.embedded import EmbeddedPostgres
from workqueue.db.engine import build_engine, build_sessions
from workqueue.db.migrate import upgrade_to_head
from workqueue.db.url import libpq_conninfo, normalize_database_url

# `key` and `issuer`: a real local OIDC issuer for API tests with tokens.
pytest_plugins = ["oidc_fixtures"]

TEMPLATE_DATABASE = "workqueue_test_template"

share_default_trust_store()

# Tests that run alone: `make test` runs them after the parallel part, in a pytest of
# their own (`-m serial`). They count what happens within fixed times, or kill and
# restart processes on purpose; beside other workers, starved of CPU, they fail with no
# fault in the code (measured: docs/development.md). Path prefixes of node ids.
SERIAL = {
    "tests/chaos/": "replicas killed, the database cut: readiness within 60 s, timings",
    "tests/integration/trunk/test_trunk_two_processes.py::": "asserts it ends within 60 s",
    "tests/integration/queue/test_batched_steps.py::"
    "test_a_manager_steps_a_backlog_in_shared_transactions": "items per commit in a step budget",
    "tests/integration/queue/test_leases_and_shutdown.py::"
    "test_deadline_releases_the_claim_between_steps": "2-4 steps of 0.1 s in a 0.25 s deadline",
    "tests/integration/outbox/test_outbox_delivery.py::"
    "test_gives_up_after_max_age_marks_abandoned_logs_and_audits": "3 attempts within 0.6 s",
}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.nodeid.startswith(tuple(SERIAL)):
            item.add_marker(pytest.mark.serial)


# As the libraries define them, taken before any test runs (see `asgi_apps_as_defined`).
_ASGI_CALLS = {Starlette: Starlette.__dict__["__call__"], FastAPI: FastAPI.__dict__["__call__"]}


@pytest.fixture(autouse=True)
def asgi_apps_as_defined(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test starts with Starlette's and FastAPI's own `__call__`.

    Sentry's integration, once initialised (tests/observability), wraps them for the
    rest of the process; the service then rightly keeps webhooks on the full stack
    (api/app.py), and a later test of a plain service would see an instrumented one.
    """
    for cls, call in _ASGI_CALLS.items():
        monkeypatch.setattr(cls, "__call__", call)


TEST_SERVER_SETTINGS = {
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
    "max_connections": "300",
}


@pytest.fixture(scope="session")
def server_url() -> Iterator[URL]:
    """URL of the `postgres` database of the session's cluster."""
    external = os.environ.get("TEST_DATABASE_URL")
    if external:
        yield normalize_database_url(external).set(database="postgres")
        return
    directory = Path(tempfile.mkdtemp(prefix="workqueue-test-pg-"))
    cluster = EmbeddedPostgres(directory, database="postgres", server_settings=TEST_SERVER_SETTINGS)
    try:
        yield cluster.start()
    finally:
        cluster.stop(mode="immediate")
        shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture(scope="session")
def template_url(server_url: URL) -> URL:
    with admin_connection(server_url) as connection:
        connection.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                sql.Identifier(TEMPLATE_DATABASE)
            )
        )
        connection.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(TEMPLATE_DATABASE)))
    url = server_url.set(database=TEMPLATE_DATABASE)
    engine = build_engine(url, pool_size=1)
    try:
        upgrade_to_head(engine)
        create_support_tables(engine)
    finally:
        engine.dispose()
    return url


@pytest.fixture(scope="session")
def database_pool(server_url: URL, template_url: URL) -> Iterator[DatabasePool]:
    pool = DatabasePool(server_url, template_url.database or TEMPLATE_DATABASE)
    try:
        yield pool
    finally:
        pool.close()


@pytest.fixture
def database_url(database_pool: DatabasePool) -> Iterator[URL]:
    """A fresh, fully migrated database for one test (made ahead, dropped after it)."""
    url = database_pool.take()
    try:
        yield url
    finally:
        database_pool.give_back(url)


@pytest.fixture
def engine(database_url: URL) -> Iterator[Engine]:
    engine = build_engine(database_url, pool_size=20)
    try:
        yield engine
    finally:
        engine.dispose()


@pytest.fixture
def sessions(engine: Engine) -> sessionmaker[Session]:
    return build_sessions(engine)


@pytest.fixture
def conninfo(database_url: URL) -> str:
    return libpq_conninfo(database_url)
