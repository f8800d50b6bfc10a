"""Trunk validation under a push storm: pipelines triggered, push → trigger latency, SQL per push.

An embedded PostgreSQL and the GitLab simulator; two ProcessingManagers (as two
replicas would) handle the `trunk` type with its defaults (max_concurrent 1,
gate_recheck_seconds 30). A CI thread plays the runners: every pipeline the
service triggers ends green 2 s later and its Pipeline Hook is delivered.

1. Idle: one push at a time, each after the previous build ended; push (the
   hook stored) → the pipeline appearing on GitLab, p50/p99.
2. Storm: `--pushes` (default 1,000) pushes to one branch within `--seconds`
   (default 10), from four concurrent pushers (each a commit on the branch and
   its Push Hook stored); how many pipelines were triggered, and whether every
   head ended green or superseded once the last build finished.
3. Statements: SQL statements sent per push by the hook ingest (the Push Hook's
   transaction) and by everything the service did for the storm (ingest,
   processing, pipeline hooks), divided by the pushes.

Usage: python benchmarks/trunk.py [--pushes 1000] [--seconds 10] [--idle 20] [--json]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from workqueue.db.embedded import EmbeddedPostgres
from workqueue.db.engine import build_engine, build_sessions
from workqueue.db.migrate import upgrade_to_head
from workqueue.db.transactions import run_in_transaction
from workqueue.db.url import libpq_conninfo
from workqueue.gitlab.client import GitLabClient
from workqueue.queue.intake.pending_events import ingest_event
from workqueue.queue.processing.config import ProcessingConfig
from workqueue.queue.processing.manager import ProcessingManager
from workqueue.testing.gitlab_simulator import GitLabSimulator
from workqueue.types.catalog import build_registry
from workqueue.types.plugin import InstallContext

PROJECT, BRANCH, TOKEN = "bench/app", "main", "bench-token"
BUILD_SECONDS = 2.0
DRIVERS = 4  # concurrent pushers: one alone cannot offer 100 pushes/s on two cores


class StatementCounter:
    """Counts the statements an engine sends (SQLAlchemy's cursor events)."""

    def __init__(self, engine: Engine) -> None:
        self.count = 0
        self._lock = threading.Lock()
        sa.event.listen(engine, "before_cursor_execute", self._seen)

    def _seen(self, *_: Any) -> None:
        with self._lock:
            self.count += 1


class CI:
    """Ends every API pipeline green after BUILD_SECONDS and delivers its hook."""

    def __init__(
        self, simulator: GitLabSimulator, deliver: Callable[[dict[str, Any]], None]
    ) -> None:
        self.simulator = simulator
        self.deliver = deliver
        self.seen: dict[int, float] = {}  # pipeline id → when first seen (perf_counter)
        self.sha_of: dict[int, str] = {}
        self.ended: set[int] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bench-ci", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)

    def _run(self) -> None:
        while not self._stop.is_set():
            now = time.perf_counter()
            for pipeline in self.simulator.pipeline_ids(PROJECT, source="api"):
                if pipeline not in self.seen:
                    self.seen[pipeline] = now
                    variables = self.simulator.pipeline_variables(pipeline)
                    self.sha_of[pipeline] = variables["WORKQUEUE_TRUNK_SHA"]
                elif pipeline not in self.ended and now - self.seen[pipeline] >= BUILD_SECONDS:
                    self.ended.add(pipeline)
                    self.simulator.set_pipeline_status(pipeline, "success")
                    self.deliver(self.simulator.pipeline_hook(pipeline))
            self._stop.wait(0.005)

    def building(self) -> bool:
        return len(self.ended) < len(self.seen)


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def main() -> None:  # noqa: C901, PLR0915 - one measurement script
    parser = argparse.ArgumentParser()
    parser.add_argument("--pushes", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--idle", type=int, default=20)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    directory = Path(tempfile.mkdtemp(prefix="workqueue-bench-trunk-"))
    cluster = EmbeddedPostgres(
        directory,
        database="postgres",
        server_settings={"fsync": "off", "synchronous_commit": "off"},
    )
    server = cluster.start()
    simulator = GitLabSimulator(token=TOKEN)
    simulator.start()
    simulator.create_project(PROJECT, {"README.md": "# bench\n"})
    managers: list[ProcessingManager] = []
    try:
        import psycopg  # noqa: PLC0415 - only the benchmark needs it directly

        with psycopg.connect(libpq_conninfo(server), autocommit=True) as connection:
            connection.execute("CREATE DATABASE bench")
        url = server.set(database="bench")
        ingest_engine = build_engine(url, pool_size=4)
        upgrade_to_head(ingest_engine)
        service_engine = build_engine(url, pool_size=12)
        ingest_statements = StatementCounter(ingest_engine)
        service_statements = StatementCounter(service_engine)
        registry = build_registry(
            {
                "trunk": {
                    "gitlab_url": simulator.url,
                    "queues": [{"project": PROJECT, "branch": BRANCH}],
                }
            },
            InstallContext(
                gitlab_token=TOKEN,
                gitlab_client_factory=lambda base, token: GitLabClient(base, token, timeout=10),
            ),
        )
        ingest_sessions = build_sessions(ingest_engine)
        service_sessions = build_sessions(service_engine)

        def deliver(payload: dict[str, Any], sessions: Any = service_sessions) -> None:
            result = run_in_transaction(
                sessions,
                lambda session: ingest_event(
                    session,
                    registry,
                    source="webhook",
                    delivery_key=str(uuid.uuid4()),
                    event_type=payload["object_kind"],
                    body=payload,
                ),
            )
            for manager in managers:
                for item_id in result.item_ids:
                    manager.notify(item_id)

        for _ in range(2):
            manager = ProcessingManager(
                sessions=service_sessions,
                registry=registry,
                config=ProcessingConfig(workers=4),
                handled_types=["trunk"],
                listen_conninfo=libpq_conninfo(url),
            )
            manager.start()
            managers.append(manager)
        ci = CI(simulator, deliver)
        ci.start()

        def push() -> tuple[str, float]:
            sha = simulator.push(PROJECT, BRANCH, {f"f-{uuid.uuid4().hex}.txt": "x\n"})
            hook = simulator.push_hook(PROJECT, BRANCH, before="0" * 40, after=sha)
            deliver(hook, ingest_sessions)
            return sha, time.perf_counter()

        def wait_for(predicate: Callable[[], bool], timeout: float, what: str) -> None:
            deadline = time.perf_counter() + timeout
            while not predicate():
                if time.perf_counter() > deadline:
                    raise SystemExit(f"timed out waiting for {what}")
                time.sleep(0.005)

        # 1. idle latency
        idle: list[float] = []
        for _ in range(args.idle):
            wait_for(lambda: not ci.building(), 30, "the previous build")
            before = set(ci.seen)
            sha, pushed = push()
            wait_for(lambda before=before: bool(set(ci.seen) - before), 30, "the trigger")
            (pipeline,) = set(ci.seen) - before
            assert ci.sha_of[pipeline] == sha  # noqa: S101 - a measurement sanity check
            idle.append(ci.seen[pipeline] - pushed)
        wait_for(lambda: not ci.building(), 30, "the last idle build")

        # 2. the storm
        ingest_before, service_before = ingest_statements.count, service_statements.count
        triggered_before = len(ci.seen)
        started = time.perf_counter()
        interval = args.seconds / args.pushes
        schedule = iter(range(args.pushes))
        schedule_lock = threading.Lock()

        def driver() -> None:
            """One of DRIVERS pushers: each takes the next slot of the schedule."""
            while True:
                with schedule_lock:
                    index = next(schedule, None)
                if index is None:
                    return
                delay = started + index * interval - time.perf_counter()
                if delay > 0:
                    time.sleep(delay)
                push()

        drivers = [threading.Thread(target=driver) for _ in range(DRIVERS)]
        for thread in drivers:
            thread.start()
        for thread in drivers:
            thread.join()
        storm_seconds = time.perf_counter() - started

        def all_ended() -> bool:
            with service_sessions() as session:
                return (
                    not session.execute(
                        sa.text("SELECT count(*) FROM work_items WHERE phase = 'active'")
                    ).scalar_one()
                    and not ci.building()
                )

        wait_for(all_ended, 120, "every head to end")
        drained_seconds = time.perf_counter() - started
        pushes = args.pushes
        with service_sessions() as session:
            states = dict(
                session.execute(
                    sa.text("SELECT state, count(*) FROM trunk_details GROUP BY state")
                ).all()
            )
            last_green = session.execute(
                sa.text("SELECT last_green_sha, in_flight FROM trunk_queues")
            ).one()
        newest = simulator.branch_head(PROJECT, BRANCH)
        result = {
            "pushes": pushes,
            "storm_seconds": round(storm_seconds, 2),
            "drained_seconds": round(drained_seconds, 2),
            "pipelines_triggered": len(ci.seen) - triggered_before,
            "states": states,
            "newest_head_is_last_green": last_green.last_green_sha == newest,
            "in_flight_after": last_green.in_flight,
            "idle_push_to_trigger_ms": {
                "p50": round(statistics.median(idle) * 1000, 1),
                "p99": round(percentile(idle, 0.99) * 1000, 1),
            },
            "statements_per_push": {
                "hook_ingest": round((ingest_statements.count - ingest_before) / pushes, 2),
                "everything": round(
                    (
                        ingest_statements.count
                        - ingest_before
                        + service_statements.count
                        - service_before
                    )
                    / pushes,
                    2,
                ),
            },
        }
        ci.stop()
    finally:
        for manager in managers:
            manager.stop(timeout=10)
        simulator.stop()
        cluster.stop()
        shutil.rmtree(directory, ignore_errors=True)
    if args.json:
        json.dump(result, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        for key, value in result.items():
            print(f"{key}: {value}")


if __name__ == "__main__":
    main()
