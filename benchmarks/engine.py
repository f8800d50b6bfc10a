"""Engine throughput on a no-op item type versus the raw PostgreSQL claim ceiling.

For each worker count W, in the same run and on the same cluster:

* engine: N items of a no-op type (one action each) processed by a
  ProcessingManager with W workers, from the first claim until every item is
  idle again;
* raw ceiling: W threads, each with its own psycopg connection, running the
  bare loop `SELECT ... FOR UPDATE SKIP LOCKED LIMIT 1; UPDATE; COMMIT` over
  N ready rows with a partial index.

Usage:
    python benchmarks/engine.py                      # W = 1, 4, 10; a table
    python benchmarks/engine.py --items 5000 --workers 4 --json
    python benchmarks/engine.py --database-url postgresql://...   # external server

The embedded cluster runs with PostgreSQL's default durability (fsync and
synchronous_commit on), like a real deployment.
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
import sqlalchemy as sa
from psycopg import sql
from sqlalchemy.engine import URL

from workqueue.db.embedded import EmbeddedPostgres
from workqueue.db.engine import build_engine, build_sessions
from workqueue.db.migrate import upgrade_to_head
from workqueue.db.url import libpq_conninfo, normalize_database_url
from workqueue.queue.contract import Action, ExecutionContext
from workqueue.queue.dimensions import Dimensions
from workqueue.queue.models import DimensionStatus, WorkItem
from workqueue.queue.processing.config import ProcessingConfig
from workqueue.queue.processing.manager import ProcessingManager
from workqueue.queue.registry import TypeRegistry

BENCH_TYPE = "bench_noop"


class NoopItem(WorkItem):
    __mapper_args__ = {"polymorphic_identity": BENCH_TYPE}


def decide(_item: Any, dimensions: Dimensions) -> Action | None:
    return Action("noop") if dimensions.needs("needs_noop") else None


def noop(context: ExecutionContext) -> None:
    context.set_dimension("needs_noop", DimensionStatus.FALSE)


def build_registry() -> TypeRegistry:
    registry = TypeRegistry()
    registry.register(BENCH_TYPE, model=NoopItem, decider=decide).add_executor("noop", noop)
    return registry


def fresh_database(server: URL) -> URL:
    name = f"workqueue_bench_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(libpq_conninfo(server), autocommit=True) as connection:
        connection.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    return server.set(database=name)


def drop_database(server: URL, url: URL) -> None:
    with psycopg.connect(libpq_conninfo(server), autocommit=True) as connection:
        connection.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                sql.Identifier(url.database or "")
            )
        )


@contextmanager
def benchmark_server(database_url: str | None, prefix: str) -> Iterator[URL]:
    """The server to benchmark on: `database_url`, or a throwaway embedded cluster."""
    if database_url:
        yield normalize_database_url(database_url)
        return
    cluster_dir = Path(tempfile.mkdtemp(prefix=prefix))
    cluster = EmbeddedPostgres(cluster_dir, database="postgres")
    try:
        yield cluster.start()
    finally:
        cluster.stop()
        shutil.rmtree(cluster_dir, ignore_errors=True)


def run_engine(url: URL, items: int, workers: int) -> float:
    engine = build_engine(url, pool_size=workers + 4)
    try:
        upgrade_to_head(engine)
        with engine.begin() as connection:
            connection.execute(
                sa.text(
                    "INSERT INTO work_items (item_type, caller_identity, actionable) "
                    "SELECT :item_type, 'bench', true FROM generate_series(1, :n)"
                ),
                {"item_type": BENCH_TYPE, "n": items},
            )
            connection.execute(sa.text("ANALYZE work_items"))
        manager = ProcessingManager(
            sessions=build_sessions(engine),
            registry=build_registry(),
            config=ProcessingConfig(workers=workers),
            handled_types=[BENCH_TYPE],
        )
        started = time.perf_counter()
        manager.start()  # the startup sweep finds the backlog
        with psycopg.connect(libpq_conninfo(url), autocommit=True) as probe:
            while True:
                time.sleep(0.05)
                row = probe.execute("SELECT count(*) FROM work_items WHERE actionable").fetchone()
                if row is not None and row[0] == 0:
                    break
        elapsed = time.perf_counter() - started
        manager.stop()
        with engine.connect() as connection:
            done = connection.execute(
                sa.text("SELECT count(*) FROM work_item_statuses WHERE status = 'false'")
            ).scalar_one()
        if done != items:
            raise RuntimeError(f"engine finished {done} of {items} items")
        return items / elapsed
    finally:
        engine.dispose()


def run_raw(url: URL, items: int, workers: int) -> float:
    conninfo = libpq_conninfo(url)
    with psycopg.connect(conninfo, autocommit=True) as connection:
        connection.execute(
            "CREATE TABLE raw_jobs (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,"
            " ready boolean NOT NULL DEFAULT true, done_at timestamptz)"
        )
        connection.execute("CREATE INDEX raw_jobs_ready ON raw_jobs (id) WHERE ready")
        connection.execute(
            "INSERT INTO raw_jobs (ready) SELECT true FROM generate_series(1, %s)", (items,)
        )
        connection.execute("ANALYZE raw_jobs")

    def worker(counts: list[int]) -> None:
        done = 0
        with psycopg.connect(conninfo) as connection:
            while True:
                row = connection.execute(
                    "SELECT id FROM raw_jobs WHERE ready ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED"
                ).fetchone()
                if row is None:
                    connection.commit()
                    break
                connection.execute(
                    "UPDATE raw_jobs SET ready = false, done_at = now() WHERE id = %s", row
                )
                connection.commit()
                done += 1
        counts.append(done)

    counts: list[int] = []
    threads = [threading.Thread(target=worker, args=(counts,)) for _ in range(workers)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    if sum(counts) != items:
        raise RuntimeError(f"raw loop finished {sum(counts)} of {items} rows")
    return items / elapsed


def measure(server: URL, items: int, workers: int) -> dict[str, float]:
    results: dict[str, float] = {"workers": workers, "items": items}
    for name, runner in (("raw_claims_per_s", run_raw), ("engine_actions_per_s", run_engine)):
        url = fresh_database(server)
        try:
            results[name] = round(runner(url, items, workers), 1)
        finally:
            drop_database(server, url)
    results["ratio"] = round(results["engine_actions_per_s"] / results["raw_claims_per_s"], 3)
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=3000)
    parser.add_argument("--workers", type=int, action="append", help="repeatable")
    parser.add_argument("--json", action="store_true", help="one JSON object (first --workers)")
    parser.add_argument("--database-url", help="use this server instead of an embedded one")
    arguments = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    worker_counts = arguments.workers or ([10] if arguments.json else [1, 4, 10])

    with benchmark_server(arguments.database_url, "workqueue-bench-") as server:
        if arguments.json:
            print(json.dumps(measure(server, arguments.items, worker_counts[0])))
            return 0
        print(f"{'workers':>8} {'engine actions/s':>18} {'raw claims/s':>14} {'ratio':>7}")
        for workers in worker_counts:
            row = measure(server, arguments.items, workers)
            print(
                f"{workers:>8} {row['engine_actions_per_s']:>18.1f} "
                f"{row['raw_claims_per_s']:>14.1f} {row['ratio']:>7.2f}"
            )
        return 0


if __name__ == "__main__":
    sys.exit(main())
