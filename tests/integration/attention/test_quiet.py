"""Two replicas, engine and attention reconciler each: empty → active → quiet, counted by
pg_stat_statements on a cluster of this module's own (the shared one has no preload)."""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
import sqlalchemy as sa
from attention_support import members, wait_until
from harness import fast_config, settled
from sample_type import Behaviour, build_registry, create_item, create_support_tables
from sqlalchemy.engine import URL

from workqueue.attention.config import AttentionConfig
from workqueue.attention.reconciler import AttentionReconciler
from workqueue.db.embedded import EmbeddedPostgres
from workqueue.db.engine import build_engine, build_sessions
from workqueue.db.migrate import upgrade_to_head
from workqueue.db.url import libpq_conninfo
from workqueue.queue.processing.manager import ProcessingManager

QUIET_SECONDS = 3.0
LEASE_SECONDS = 2.0


@pytest.fixture(scope="module")
def counted_url() -> Iterator[URL]:
    directory = Path(tempfile.mkdtemp(prefix="workqueue-attention-pg-"))
    cluster = EmbeddedPostgres(
        directory,
        database="postgres",
        server_settings={
            "fsync": "off",
            "synchronous_commit": "off",
            "shared_preload_libraries": "pg_stat_statements",
            "pg_stat_statements.track": "all",
        },
    )
    server = cluster.start()
    try:
        with psycopg.connect(libpq_conninfo(server), autocommit=True) as connection:
            connection.execute("CREATE DATABASE quiet")
            connection.execute("CREATE EXTENSION pg_stat_statements")
        url = server.set(database="quiet")
        engine = build_engine(url, pool_size=2)
        upgrade_to_head(engine)
        create_support_tables(engine)
        engine.dispose()
        yield url
    finally:
        cluster.stop(mode="immediate")
        shutil.rmtree(directory, ignore_errors=True)


def per_statement(server_conninfo: str) -> dict[str, int]:
    """Calls per statement text in the test database: what moved, when something did."""
    with psycopg.connect(server_conninfo, autocommit=True) as connection:
        rows = connection.execute(
            "SELECT left(query, 120), calls FROM pg_stat_statements s "
            "JOIN pg_database d ON d.oid = s.dbid WHERE d.datname = 'quiet'"
        ).fetchall()
    return {str(query): int(calls) for query, calls in rows}


def test_two_replicas_go_quiet_after_work(counted_url):
    server_conninfo = libpq_conninfo(counted_url.set(database="postgres"))
    conninfo = libpq_conninfo(counted_url)
    behaviour = Behaviour(permanent={"boom"})
    replicas = []
    for _ in range(2):
        engine = build_engine(counted_url, pool_size=8)
        sessions = build_sessions(engine)
        registry = build_registry(behaviour)
        attention = AttentionReconciler(
            sessions=sessions,
            registry=registry,
            rules=AttentionConfig().queues,
            listen_conninfo=conninfo,
        )
        manager = ProcessingManager(
            sessions=sessions,
            registry=registry,
            config=fast_config(safety_sweep_seconds=300, lease_seconds=LEASE_SECONDS),
            handled_types=["sample"],
            listen_conninfo=conninfo,
            on_item_committed=attention.item_changed,
        )
        replicas.append((engine, sessions, attention, manager))
    try:
        for _, _, attention, manager in replicas:
            attention.start()
            manager.start()
        for _, _, attention, _ in replicas:
            assert attention.listening.wait(10)
        sessions = replicas[0][1]
        # Empty: started, nothing to do.
        wait_until(lambda: all(not r[2].board.pending() for r in replicas), what="empty")
        # Active: items in two projects, one fails for good and needs a human.
        with sessions() as session:
            ok = create_item(session, ["a"])
            failing = create_item(session, ["boom"])
            session.execute(
                sa.text("UPDATE work_items SET project_path = 'p/' || id WHERE id IN (:a, :b)"),
                {"a": ok, "b": failing},
            )
            session.commit()
        replicas[0][3].notify(ok)
        replicas[1][3].notify(failing)
        wait_until(lambda: members(sessions, "needs-human") == {failing}, what="membership")
        wait_until(lambda: settled(sessions), what="engine settled")
        wait_until(lambda: all(not r[2].board.pending() for r in replicas), what="reconciled")
        # The engine's one-shot timer may still fire for a lease seen while
        # busy (another replica's); after it, nothing is due anywhere.
        time.sleep(LEASE_SECONDS + 1)
        # Quiet: no statement at all from either replica.
        before = per_statement(server_conninfo)
        time.sleep(QUIET_SECONDS)
        after = per_statement(server_conninfo)
        moved = {query: calls - before.get(query, 0) for query, calls in after.items()}
        assert {query: calls for query, calls in moved.items() if calls} == {}
    finally:
        for engine, _, attention, manager in replicas:
            manager.stop(timeout=10)
            attention.stop(timeout=10)
            engine.dispose()
