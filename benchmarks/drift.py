"""What waiting costs without webhooks, and how late a merge comes when hooks are lost.

Runs the real engine and `mr` type against the GitLab simulator, with every
hook lost (nothing is delivered at all), `drift_check_seconds` = D:

1. N items open their MRs; CI starts (running pipelines) and the service
   hears nothing. For W seconds the GitLab calls are counted: calls per item
   per drift period, beside the floor of one MR read per item per period
   (what noticing anything without hooks takes). Scaled to an hour at the
   default D = 300 s (12 periods).
2. Right after a round of drift checks (the worst moment: every item's next
   check about D away) every pipeline turns green, still without hooks. For
   each item the delay from green to its merge call (`PUT …/merge` reaching the simulator)
   is measured beside its floor: the time left until the item's drift check
   was due (its `pending_until` read at the moment CI went green), which no
   implementation re-reading on a timer can beat. delay - floor is the
   service's own part (claim, MR read, reconcile's read, the merge call).

Usage: python benchmarks/drift.py [--items N] [--drift-seconds D] [--wait-periods P]
                                  [--json] [--database-url URL]
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from workqueue.db.embedded import EmbeddedPostgres
from workqueue.db.engine import build_engine, build_sessions
from workqueue.db.migrate import upgrade_to_head
from workqueue.db.transactions import run_in_transaction
from workqueue.db.url import normalize_database_url
from workqueue.gitlab.client import GitLabClient
from workqueue.queue import Submitter
from workqueue.queue.processing.config import ProcessingConfig
from workqueue.queue.processing.manager import ProcessingManager
from workqueue.testing.gitlab_simulator import GitLabSimulator, JobSpec
from workqueue.types.catalog import build_registry
from workqueue.types.mr.config import MRTypeConfig
from workqueue.types.mr.schemas import MRWorkItemCreate
from workqueue.types.mr.submit import submit_mr
from workqueue.types.plugin import InstallContext

PROJECT = "bench/drift"
TOKEN = "benchmark-token"  # noqa: S105 - the simulator's token
DEFAULT_DRIFT_SECONDS = 300.0
MERGE_PATH = re.compile(r"/merge_requests/(\d+)/merge$")


def submission(n: int) -> MRWorkItemCreate:
    return MRWorkItemCreate.model_validate(
        {
            "project": PROJECT,
            "source_branch": f"workqueue/drift-{n}",
            "title": f"Change {n}",
            "commit_message": f"Change {n}",
            "file_actions": [{"action": "create", "file_path": f"f/{n}.txt", "content": "x\n"}],
        }
    )


def _wait(predicate: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(0.01)


def _percentiles(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {
        "p50": round(statistics.median(ordered), 3),
        "p90": round(ordered[int(0.9 * (len(ordered) - 1))], 3),
        "max": round(ordered[-1], 3),
    }


def _green_to_merge(
    engine: Any, simulator: GitLabSimulator, pipelines: list[int], iids: list[int], drift: float
) -> tuple[list[float], list[float]]:
    """Turn every pipeline green; per item, seconds to its merge call and its floor."""
    with engine.connect() as connection:
        due = dict(
            connection.execute(
                sa.text(
                    "SELECT d.mr_iid, extract(epoch FROM s.pending_until)::float "
                    "FROM work_item_statuses s JOIN mr_details d ON d.id = s.work_item_id "
                    "WHERE s.dimension = 'needs_drift_check'"
                )
            ).all()
        )
    green_at = time.time()
    for pipeline in pipelines:
        for job in simulator.jobs(pipeline):
            simulator.set_job_status(job["id"], "success")
    _wait(
        lambda: len(simulator.merge_requests(PROJECT, state="merged")) == len(iids),
        10 * drift + 60,
        "every merge",
    )
    merged_at: dict[int, float] = {}
    for record in simulator.log.records("PUT"):
        found = MERGE_PATH.search(record.path)
        if found and record.started_at is not None:
            merged_at.setdefault(int(found[1]), record.started_at)
    delays = [merged_at[iid] - green_at for iid in iids]
    # No pending_until: the engine has just woken the item for its check (due now).
    floors = [max((due[iid] or green_at) - green_at, 0.0) for iid in iids]
    return delays, floors


def run(database_url: Any, items: int, drift: float, wait_periods: int) -> dict[str, Any]:
    simulator = GitLabSimulator(token=TOKEN).start()
    engine = build_engine(database_url, pool_size=8)
    manager: ProcessingManager | None = None
    try:
        upgrade_to_head(engine)
        with engine.begin() as connection:
            connection.execute(sa.text("TRUNCATE work_items CASCADE"))
        simulator.create_project(PROJECT, {"README.md": "x\n"})
        registry = build_registry(
            {"mr": {"gitlab_url": simulator.url, "drift_check_seconds": drift}},
            InstallContext(gitlab_token=TOKEN, gitlab_client_factory=GitLabClient),
        )
        mr = registry.get("mr")
        config = mr.config
        assert isinstance(config, MRTypeConfig)  # noqa: S101
        sessions = build_sessions(engine)
        manager = ProcessingManager(
            sessions=sessions,
            registry=registry,
            config=ProcessingConfig(workers=4),
            handled_types=["mr"],
        )
        manager.start()

        def count(name: str) -> float:
            return sum(mr.counters[name].read().values())

        for n in range(items):
            result = run_in_transaction(
                sessions,
                lambda session, n=n: submit_mr(
                    session, submission(n), submitter=Submitter("local", "bench"), config=config
                ),
            )
            manager.notify(result.item.id)
        _wait(
            lambda: len(simulator.merge_requests(PROJECT, state="opened")) == items,
            60,
            "the MRs",
        )
        iids = [mr_head.iid for mr_head in simulator.merge_request_heads(PROJECT)]
        pipelines = [
            simulator.create_pipeline(
                PROJECT, merge_request_iid=iid, jobs=[JobSpec("test", status="running")]
            )
            for iid in iids
        ]

        # 1. Waiting, hooks lost.
        time.sleep(drift)  # every item's deadline passes once (the running pipeline found)
        simulator.reset_requests()
        checks_before = count("drift_checks")
        started = time.monotonic()
        time.sleep(wait_periods * drift)
        waited = time.monotonic() - started
        calls = simulator.request_count()
        checks = count("drift_checks") - checks_before
        periods = waited / drift
        calls_per_item_period = calls / items / periods

        # 2. Green pipelines, hooks lost, right after every item's drift check ran: the
        # worst moment, each item's next check about D away.
        checked = count("drift_checks")
        _wait(lambda: count("drift_checks") >= checked + items, 3 * drift + 60, "a round")
        delays, floors = _green_to_merge(engine, simulator, pipelines, iids, drift)
        overheads = [delay - floor for delay, floor in zip(delays, floors, strict=True)]
    finally:
        if manager is not None:
            manager.stop()
        engine.dispose()
        simulator.stop()
    per_hour_default = calls_per_item_period * 3600 / DEFAULT_DRIFT_SECONDS
    return {
        "items": items,
        "drift_check_seconds": drift,
        "waiting_seconds": round(waited, 2),
        "waiting_periods": round(periods, 2),
        "waiting_calls": calls,
        "waiting_drift_checks": checks,
        "calls_per_item_per_period": round(calls_per_item_period, 3),
        "floor_calls_per_item_per_period": 1.0,
        "calls_per_item_per_hour_at_300s": round(per_hour_default, 2),
        "floor_calls_per_item_per_hour_at_300s": 3600 / DEFAULT_DRIFT_SECONDS,
        "green_to_merge_seconds": _percentiles(delays),
        "floor_seconds": _percentiles(floors),
        "service_part_seconds": _percentiles(overheads),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=20)
    parser.add_argument("--drift-seconds", type=float, default=2.0)
    parser.add_argument("--wait-periods", type=int, default=10)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--database-url")
    arguments = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    cluster_dir: Path | None = None
    cluster: EmbeddedPostgres | None = None
    if arguments.database_url:
        url = normalize_database_url(arguments.database_url)
    else:
        cluster_dir = Path(tempfile.mkdtemp(prefix="workqueue-bench-"))
        cluster = EmbeddedPostgres(cluster_dir)
        url = cluster.start()
    try:
        result = run(url, arguments.items, arguments.drift_seconds, arguments.wait_periods)
    finally:
        if cluster is not None:
            cluster.stop()
        if cluster_dir is not None:
            shutil.rmtree(cluster_dir, ignore_errors=True)
    if arguments.json:
        print(json.dumps(result))
        return 0
    for key, value in result.items():
        print(f"{key:40} {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
