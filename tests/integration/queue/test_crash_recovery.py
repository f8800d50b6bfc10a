"""Crashes shown with real processes: a killed worker process, a restarted PostgreSQL."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import pytest
from harness import fast_config, item_row, running_manager, settled, wait_until
from sample_type import (
    Behaviour,
    build_registry,
    create_item,
    create_items,
    create_support_tables,
    executions,
)

from workqueue.db.embedded import EmbeddedPostgres
from workqueue.db.engine import build_engine, build_sessions
from workqueue.db.migrate import upgrade_to_head
from workqueue.db.url import libpq_conninfo

SUPPORT = Path(__file__).resolve().parents[2] / "support"
pytestmark = pytest.mark.slow


def test_item_of_a_killed_process_is_reclaimed_after_its_lease_expires(
    database_url, sessions, tmp_path
):
    with sessions() as session:
        item_id = create_item(session, ["a", "b"])
        session.commit()
    marker = tmp_path / "marker"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SUPPORT), *sys.path])}
    child = subprocess.Popen(
        [
            sys.executable,
            str(SUPPORT / "run_manager.py"),
            database_url.render_as_string(hide_password=False),
            str(marker),
        ],
        env=env,
    )
    try:
        wait_until(marker.exists, timeout=30, what="the child to start the action")
        held = item_row(sessions, item_id)
        assert held.lease_token is not None
        child.send_signal(signal.SIGKILL)
        child.wait(10)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()

    behaviour = Behaviour(worker_name="survivor")
    with running_manager(sessions, build_registry(behaviour), fast_config()):
        wait_until(lambda: settled(sessions), timeout=30, what="recovery")
    row = item_row(sessions, item_id)
    assert (row.actionable, row.attempts, row.lease_token) == (False, 0, None)
    with sessions() as session:
        # The killed process committed nothing; each step ran once, by the survivor.
        assert [(variant, worker) for _, variant, worker in executions(session)] == [
            ("a", "survivor"),
            ("b", "survivor"),
        ]


def test_engine_survives_a_postgresql_restart():
    directory = Path(tempfile.mkdtemp(prefix="workqueue-restart-"))
    # Durable settings: with fsync/synchronous_commit off a crash may drop
    # committed transactions, which is not what this test is about.
    cluster = EmbeddedPostgres(directory)
    url = cluster.start()
    engine = build_engine(url, pool_size=12)
    try:
        upgrade_to_head(engine)
        create_support_tables(engine)
        sessions = build_sessions(engine)
        with sessions() as session:
            ids = create_items(session, 60, ["x", "y"])
            session.commit()
        behaviour = Behaviour(sleep_seconds=0.02)
        config = fast_config(workers=4, lease_seconds=3, heartbeat_seconds=0.5)
        with running_manager(
            sessions, build_registry(behaviour), config, conninfo=libpq_conninfo(url)
        ):
            wait_until(lambda: len(behaviour.calls) >= 10, what="work under way")
            cluster.kill()
            time.sleep(1.0)
            cluster.restart_server()
            wait_until(lambda: _settled_ignoring_errors(sessions), timeout=60, what="recovery")
            # New work after the restart is still woken by NOTIFY (listener reconnected).
            with sessions() as session:
                late = create_item(session, ["z"])
                session.commit()
            wait_until(lambda: behaviour.calls[(late, "z")] == 1, timeout=10, what="late item")
            wait_until(lambda: settled(sessions), what="settle")
        with sessions() as session:
            done = Counter((item, variant) for item, variant, _ in executions(session))
        assert set(done) == {(item, v) for item in ids for v in ("x", "y")} | {(late, "z")}
        assert set(done.values()) == {1}
    finally:
        engine.dispose()
        cluster.stop(mode="immediate")
        shutil.rmtree(directory, ignore_errors=True)


def _settled_ignoring_errors(sessions) -> bool:
    try:
        return settled(sessions)
    except Exception:
        return False
