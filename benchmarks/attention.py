"""Attention queues: startup reconstruction, membership lag under load, statements per change.

An embedded PostgreSQL (with pg_stat_statements) holds 100,000 `mr` items
across 1,000 projects, 10 % failed and 10 % with a review blocker. Measured:

1. the time a fresh reconciler takes to reconstruct every membership;
2. membership lag after an item change at a steady rate (default 200/s):
   a driver commits `phase = failed` on an item and reports the change as the
   engine would (`item_changed`); lag = commit → the membership's audit entry
   (written right after the reconciler's commit);
3. statements the reconciler sends per change (pg_stat_statements, counted
   for the reconciler's role only; the driver uses another role).

Usage: python benchmarks/attention.py [--items 100000] [--projects 1000] [--rate 200]
       [--seconds 10] [--json]
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import psycopg

from workqueue.attention.config import AttentionConfig
from workqueue.attention.reconciler import AttentionReconciler
from workqueue.db.embedded import EmbeddedPostgres
from workqueue.db.engine import build_engine, build_sessions
from workqueue.db.migrate import upgrade_to_head
from workqueue.db.url import libpq_conninfo
from workqueue.queue.audit.log import AuditEntry, AuditLog
from workqueue.queue.registry import TypeRegistry
from workqueue.types.mr.models import MRWorkItem


class AddedTimes(AuditLog):
    """Records when each `attention_added` entry was written, per item."""

    def __init__(self) -> None:
        super().__init__()
        self.lock = threading.Lock()
        self.added: dict[uuid.UUID, float] = {}

    def write_all(self, entries: Any, **_: Any) -> None:
        now = time.perf_counter()
        with self.lock:
            for entry in entries:
                added = isinstance(entry, AuditEntry) and entry.event_type == "attention_added"
                if added and entry.work_item_id is not None:
                    self.added.setdefault(entry.work_item_id, now)


def populate(conninfo: str, items: int, projects: int) -> None:
    with psycopg.connect(conninfo, autocommit=True) as connection:
        connection.execute(
            "INSERT INTO work_items (id, item_type, phase, caller_identity, project_path) "
            "SELECT gen_random_uuid(), 'mr', CASE WHEN n %% 10 = 0 THEN 'failed' ELSE 'active' END,"
            "  'bench', 'group/p' || (n %% %s) FROM generate_series(1, %s) AS n",
            (projects, items),
        )
        connection.execute(
            "INSERT INTO mr_details (id, project, source_branch, title, commit_message, "
            "  file_actions, content_hash, merge_blocker) "
            "SELECT id, project_path, 'workqueue/' || id, 't', 'm', '[]', 'h', "
            '  CASE WHEN random() < 0.1 THEN \'{"code": "not_approved"}\'::jsonb END '
            "FROM work_items"
        )
        connection.execute("ANALYZE")


def count_members(conninfo: str) -> int:
    with psycopg.connect(conninfo, autocommit=True) as connection:
        row = connection.execute(
            "SELECT count(*) FROM attention_memberships WHERE removed_at IS NULL"
        ).fetchone()
    return int(row[0]) if row else 0


def expected_members(conninfo: str) -> int:
    with psycopg.connect(conninfo, autocommit=True) as connection:
        row = connection.execute(
            "SELECT count(*) FILTER (WHERE w.phase = 'failed') "
            "     + count(*) FILTER (WHERE d.merge_blocker->>'code' = 'not_approved') "
            "FROM work_items w JOIN mr_details d USING (id)"
        ).fetchone()
    return int(row[0]) if row else 0


def reconciler_statements(server_conninfo: str) -> int:
    with psycopg.connect(server_conninfo, autocommit=True) as connection:
        row = connection.execute(
            "SELECT coalesce(sum(calls), 0) FROM pg_stat_statements s "
            "JOIN pg_database d ON d.oid = s.dbid JOIN pg_roles r ON r.oid = s.userid "
            "WHERE d.datname = 'bench' AND r.rolname <> 'driver'"
        ).fetchone()
    return int(row[0]) if row else 0


def drive_changes(
    attention: AttentionReconciler, url: Any, server_conninfo: str, rate: float, seconds: float
) -> dict[uuid.UUID, float]:
    """Commit `phase = failed` on active, unqueued items at `rate`; returns commit times."""
    with psycopg.connect(libpq_conninfo(url), autocommit=True) as connection:
        candidates = [
            (row[0], row[1])
            for row in connection.execute(
                "SELECT w.id, w.project_path FROM work_items w JOIN mr_details d USING (id) "
                "WHERE w.phase = 'active' AND d.merge_blocker IS NULL"
            )
        ]
    random.shuffle(candidates)
    with psycopg.connect(server_conninfo, autocommit=True) as connection:
        connection.execute("SELECT pg_stat_statements_reset()")
    committed: dict[uuid.UUID, float] = {}
    interval = 1.0 / rate
    with psycopg.connect(libpq_conninfo(url.set(username="driver")), autocommit=True) as driver:
        begin = time.perf_counter()
        for index, (item_id, project) in enumerate(candidates[: int(rate * seconds)]):
            pause = begin + index * interval - time.perf_counter()
            if pause > 0:
                time.sleep(pause)
            driver.execute("UPDATE work_items SET phase = 'failed' WHERE id = %s", (item_id,))
            committed[item_id] = time.perf_counter()
            attention.item_changed(item_id, project)
    return committed


def wait_served(
    attention: AttentionReconciler, audit: AddedTimes, committed: dict[uuid.UUID, float]
) -> None:
    deadline = time.perf_counter() + 60
    while time.perf_counter() < deadline:
        with audit.lock:
            if all(item in audit.added for item in committed):
                break
        time.sleep(0.05)
    while attention.board.pending():
        time.sleep(0.05)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--items", type=int, default=100_000)
    parser.add_argument("--projects", type=int, default=1000)
    parser.add_argument("--rate", type=float, default=200.0)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    directory = Path(tempfile.mkdtemp(prefix="workqueue-bench-attention-"))
    cluster = EmbeddedPostgres(
        directory,
        database="postgres",
        server_settings={
            "fsync": "off",
            "synchronous_commit": "off",
            "shared_preload_libraries": "pg_stat_statements",
        },
    )
    server = cluster.start()
    server_conninfo = libpq_conninfo(server)
    try:
        with psycopg.connect(server_conninfo, autocommit=True) as connection:
            connection.execute("CREATE DATABASE bench")
            connection.execute("CREATE EXTENSION pg_stat_statements")
            connection.execute("CREATE ROLE driver LOGIN SUPERUSER")
        url = server.set(database="bench")
        conninfo = libpq_conninfo(url)
        engine = build_engine(url, pool_size=4)
        upgrade_to_head(engine)
        populate(conninfo, args.items, args.projects)
        expected = expected_members(conninfo)

        registry = TypeRegistry()
        registry.register("mr", model=MRWorkItem, decider=lambda _item, _dimensions: None)
        audit = AddedTimes()
        attention = AttentionReconciler(
            sessions=build_sessions(engine),
            registry=registry,
            rules=AttentionConfig().queues,
            audit=audit,
        )
        started = time.perf_counter()
        attention.start()
        while attention.board.pending():
            time.sleep(0.05)
        reconstruction = time.perf_counter() - started
        if count_members(conninfo) != expected:
            raise SystemExit(f"reconstructed {count_members(conninfo)} of {expected} memberships")

        committed = drive_changes(attention, url, server_conninfo, args.rate, args.seconds)
        wait_served(attention, audit, committed)
        statements = reconciler_statements(server_conninfo)  # reset when driving began
        attention.stop()
        engine.dispose()
        lags = sorted(
            audit.added[item] - at for item, at in committed.items() if item in audit.added
        )
        result = {
            "items": args.items,
            "projects": args.projects,
            "memberships": expected,
            "reconstruction_seconds": round(reconstruction, 2),
            "rate_per_second": args.rate,
            "changes": len(committed),
            "served": len(lags),
            "lag_p50_ms": round(statistics.median(lags) * 1000, 1),
            "lag_p99_ms": round(lags[int(len(lags) * 0.99) - 1] * 1000, 1),
            "statements_per_change": round(statements / max(len(committed), 1), 1),
        }
    finally:
        cluster.stop(mode="immediate")
        shutil.rmtree(directory, ignore_errors=True)
    if args.json:
        print(json.dumps(result))
    else:
        for key, value in result.items():
            print(f"{key:>24}: {value}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
