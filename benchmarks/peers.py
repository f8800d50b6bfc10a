"""The engine beside two peer PostgreSQL queues and the raw claim loop, on one cluster.

For each worker count W, in the same run, each on a fresh database of the
same cluster, N no-op jobs are drained by:

* raw: W threads running `SELECT ... FOR UPDATE SKIP LOCKED LIMIT 1; UPDATE;
  COMMIT` (the ceiling `benchmarks/engine.py` also measures);
* PgQueuer with its psycopg driver: W queue managers on one event loop, each
  with its own connection, draining with PgQueuer's default batch of 10;
* Procrastinate (psycopg connector): one worker with concurrency W;
* the engine: a ProcessingManager with W workers on the no-op type of
  `benchmarks/engine.py` (one action per item).

Every figure is the median of `--repeat` runs (default 3), taken in rounds
(each queue once per round) so that all of them see the same machine. The
peers come from the `bench` extra: `pip install -e '.[bench]'`.

Usage:
    python benchmarks/peers.py                       # W = 1, 4, 10; N = 10,000
    python benchmarks/peers.py --items 5000 --workers 4 --repeat 1 --json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import psycopg
from sqlalchemy.engine import URL

from engine import benchmark_server, drop_database, fresh_database, run_engine, run_raw
from workqueue.db.url import libpq_conninfo


def run_pgqueuer(url: URL, items: int, workers: int) -> float:
    from pgqueuer.db import PsycopgDriver  # noqa: PLC0415 - optional (bench extra)
    from pgqueuer.models import Job  # noqa: PLC0415
    from pgqueuer.qm import QueueManager  # noqa: PLC0415
    from pgqueuer.queries import Queries  # noqa: PLC0415
    from pgqueuer.types import QueueExecutionMode  # noqa: PLC0415

    conninfo = libpq_conninfo(url)

    async def main() -> float:
        setup = await psycopg.AsyncConnection.connect(conninfo, autocommit=True)
        queries = Queries(PsycopgDriver(setup))
        await queries.install()
        for start in range(0, items, 5000):
            count = min(5000, items - start)
            await queries.enqueue(["noop"] * count, [None] * count, [0] * count)
        await setup.close()

        connections = [
            await psycopg.AsyncConnection.connect(conninfo, autocommit=True) for _ in range(workers)
        ]
        managers = []
        for connection in connections:
            manager = QueueManager(Queries(PsycopgDriver(connection)))

            @manager.entrypoint("noop")
            async def noop(_job: Job) -> None:
                return None

            managers.append(manager)
        started = time.perf_counter()
        running = [
            asyncio.create_task(manager.run(mode=QueueExecutionMode.drain, batch_size=10))
            for manager in managers
        ]
        # Timed like the engine: until no job is left (done jobs leave the
        # table once their completion is written), not until the managers
        # have wound down their timers.
        async with await psycopg.AsyncConnection.connect(conninfo, autocommit=True) as probe:
            while True:
                await asyncio.sleep(0.02)
                row = await (await probe.execute("SELECT count(*) FROM pgqueuer")).fetchone()
                if row is not None and row[0] == 0:
                    break
        elapsed = time.perf_counter() - started
        for manager in managers:
            manager.shutdown.set()
        await asyncio.gather(*running)
        for connection in connections:
            await connection.close()
        return items / elapsed

    return asyncio.run(main())


def run_procrastinate(url: URL, items: int, workers: int) -> float:
    import procrastinate  # noqa: PLC0415 - optional (bench extra)

    conninfo = libpq_conninfo(url)
    app = procrastinate.App(
        connector=procrastinate.PsycopgConnector(
            conninfo=conninfo, min_size=1, max_size=workers + 2
        )
    )

    @app.task(name="noop")
    async def noop() -> None:
        return None

    async def main() -> float:
        async with app.open_async():
            await app.schema_manager.apply_schema_async()
            for start in range(0, items, 5000):
                count = min(5000, items - start)
                await noop.batch_defer_async(*({} for _ in range(count)))
            started = time.perf_counter()
            await app.run_worker_async(
                concurrency=workers, wait=False, install_signal_handlers=False
            )
            elapsed = time.perf_counter() - started
        with psycopg.connect(conninfo) as check:
            row = check.execute(
                "SELECT count(*) FROM procrastinate_jobs WHERE status <> 'succeeded'"
            ).fetchone()
        if row is None or row[0] != 0:
            raise RuntimeError(f"Procrastinate left {row} jobs")
        return items / elapsed

    return asyncio.run(main())


RUNNERS: dict[str, Callable[[URL, int, int], float]] = {
    "raw": run_raw,
    "pgqueuer": run_pgqueuer,
    "procrastinate": run_procrastinate,
    "engine": run_engine,
}


def measure(server: URL, items: int, workers: int, repeat: int) -> dict[str, Any]:
    row: dict[str, Any] = {"workers": workers, "items": items}
    rates: dict[str, list[float]] = {name: [] for name in RUNNERS}
    # Round by round, every queue once per round: on a shared machine the load
    # drifts over minutes, and each queue's median then sees the same drift.
    for _ in range(repeat):
        for name, runner in RUNNERS.items():
            url = fresh_database(server)
            try:
                rates[name].append(runner(url, items, workers))
            finally:
                drop_database(server, url)
    for name, measured in rates.items():
        row[name] = round(statistics.median(measured), 1)
    row["engine_vs_raw"] = round(row["engine"] / row["raw"], 2)
    row["engine_vs_pgqueuer"] = round(row["engine"] / row["pgqueuer"], 2)
    row["engine_vs_procrastinate"] = round(row["engine"] / row["procrastinate"], 2)
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=10_000)
    parser.add_argument("--workers", type=int, action="append", help="repeatable")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", action="store_true", help="one JSON object per worker count")
    parser.add_argument("--database-url", help="use this server instead of an embedded one")
    arguments = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    worker_counts = arguments.workers or [1, 4, 10]

    with benchmark_server(arguments.database_url, "workqueue-peers-") as server:
        if not arguments.json:
            print(
                f"{'W':>3} {'raw/s':>9} {'PgQueuer/s':>11} {'Procrastinate/s':>16} "
                f"{'engine/s':>9} {'/raw':>6} {'/PgQ':>6} {'/Proc':>6}"
            )
        for workers in worker_counts:
            row = measure(server, arguments.items, workers, arguments.repeat)
            if arguments.json:
                print(json.dumps(row), flush=True)
                continue
            print(
                f"{workers:>3} {row['raw']:>9.1f} {row['pgqueuer']:>11.1f} "
                f"{row['procrastinate']:>16.1f} {row['engine']:>9.1f} "
                f"{row['engine_vs_raw']:>6.2f} {row['engine_vs_pgqueuer']:>6.2f} "
                f"{row['engine_vs_procrastinate']:>6.2f}",
                flush=True,
            )
        return 0


if __name__ == "__main__":
    sys.exit(main())
