"""GitLab calls needed to take a submission to an open MR, from the simulator's request log.

Runs the real engine and `mr` type against the in-package GitLab simulator:
N submissions on distinct branches of one project, then one unchanged and one
changed resubmission of the first, and prints the calls per submission by
route. Target: at most 4 calls per new MR once the project lookup is cached.

Usage: python benchmarks/gitlab_calls.py [--items N] [--json] [--database-url URL]
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import sys
import tempfile
import time
from collections import Counter
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
from workqueue.testing.gitlab_simulator import GitLabSimulator
from workqueue.types.catalog import build_registry
from workqueue.types.mr.config import MRTypeConfig
from workqueue.types.mr.schemas import MRWorkItemCreate
from workqueue.types.mr.submit import submit_mr
from workqueue.types.plugin import InstallContext

PROJECT = "bench/group/project"
TOKEN = "benchmark-token"  # noqa: S105 - the simulator's token


def submission(branch: str, version: int) -> MRWorkItemCreate:
    return MRWorkItemCreate.model_validate(
        {
            "project": PROJECT,
            "source_branch": branch,
            "title": f"Update {branch}",
            "commit_message": "Update",
            "file_actions": [
                {"action": "update", "file_path": "version.txt", "content": f"{version}\n"}
            ],
        }
    )


def run(database_url: Any, items: int) -> dict[str, Any]:
    simulator = GitLabSimulator(token=TOKEN).start()
    engine = build_engine(database_url, pool_size=8)
    try:
        upgrade_to_head(engine)
        with engine.begin() as connection:
            connection.execute(sa.text("TRUNCATE work_items CASCADE"))
        simulator.create_project(PROJECT, {"version.txt": "0\n"})
        registry = build_registry(
            {"mr": {"gitlab_url": simulator.url}},
            InstallContext(gitlab_token=TOKEN, gitlab_client_factory=GitLabClient),
        )
        config = registry.get("mr").config
        assert isinstance(config, MRTypeConfig)  # noqa: S101
        sessions = build_sessions(engine)
        manager = ProcessingManager(
            sessions=sessions,
            registry=registry,
            config=ProcessingConfig(workers=4),
            handled_types=["mr"],
        )
        manager.start()

        def submit_and_settle(body: MRWorkItemCreate) -> Counter[str]:
            simulator.reset_requests()
            result = run_in_transaction(
                sessions,
                lambda session: submit_mr(
                    session, body, submitter=Submitter("local", "bench"), config=config
                ),
            )
            manager.notify(result.item.id)
            while True:
                with engine.connect() as connection:
                    busy = connection.execute(
                        sa.text("SELECT count(*) FROM work_items WHERE actionable")
                    ).scalar_one()
                if busy == 0:
                    break
                time.sleep(0.01)
            return Counter(f"{r.method} {r.route}" for r in simulator.log.records())

        per_submission = [
            submit_and_settle(submission(f"workqueue/b{n}", n + 1)) for n in range(items)
        ]
        unchanged = submit_and_settle(submission("workqueue/b0", 1))
        changed = submit_and_settle(submission("workqueue/b0", 99))
        manager.stop()
        open_mrs = len(simulator.merge_requests(PROJECT, state="opened"))
    finally:
        engine.dispose()
        simulator.stop()
    if open_mrs != items:
        raise RuntimeError(f"{open_mrs} open MRs for {items} submissions")
    return {
        "first_submission_calls": sum(per_submission[0].values()),
        "first_submission_routes": dict(per_submission[0]),
        "later_submission_calls": max(sum(c.values()) for c in per_submission[1:]),
        "later_submission_routes": dict(per_submission[-1]),
        "unchanged_resubmission_calls": sum(unchanged.values()),
        "changed_resubmission_calls": sum(changed.values()),
        "changed_resubmission_routes": dict(changed),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=5)
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
        result = run(url, max(arguments.items, 2))
    finally:
        if cluster is not None:
            cluster.stop()
        if cluster_dir is not None:
            shutil.rmtree(cluster_dir, ignore_errors=True)
    if arguments.json:
        print(json.dumps(result))
        return 0
    for key, value in result.items():
        print(f"{key:32} {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
