"""A worker killed between triggering a pipeline and recording it leaves exactly one
pipeline; a force-pushed branch makes the next admission a full build with no base."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import sqlalchemy as sa
from harness import fast_config, running_manager, settled, wait_until
from trunk_harness import (
    PROJECT,
    building,
    finish_pipeline,
    head,
    in_flight,
    land,
    queue_row,
    state_is,
    trunk_registry,
)

from workqueue.db.transactions import run_in_transaction
from workqueue.queue import enqueue
from workqueue.types.trunk.config import TrunkTypeConfig
from workqueue.types.trunk.landed_heads import WEBHOOK_SUBMITTER, ingest_head

SUPPORT = Path(__file__).resolve().parents[2] / "support"


def _ingest(sessions, registry, sha):
    config = registry.get("trunk").config.config
    assert isinstance(config, TrunkTypeConfig)
    return run_in_transaction(
        sessions,
        lambda session: ingest_head(session, config.queues[0], sha, submitter=WEBHOOK_SUBMITTER),
    ).item.id


@pytest.mark.slow
def test_sigkill_after_trigger_before_record_yields_exactly_one_pipeline(
    database_url, sessions, conninfo, simulator
):
    registry = trunk_registry(simulator.url)
    # The pipeline is created, but its answer reaches the child only after 30 s.
    simulator.inject_fault("POST", "/projects/:id/pipeline", status=None, latency_after=30)
    a = land(simulator)
    item_id = _ingest(sessions, registry, a)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SUPPORT), *sys.path])}
    child = subprocess.Popen(
        [
            sys.executable,
            str(SUPPORT / "run_trunk_manager.py"),
            database_url.render_as_string(hide_password=False),
            simulator.url,
        ],
        env=env,
    )
    try:
        wait_until(
            lambda: len(simulator.pipeline_ids(PROJECT, source="api")) == 1,
            timeout=30,
            what="the child's trigger",
        )
        child.send_signal(signal.SIGKILL)
        child.wait(10)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    # Admission was committed (a step of its own); the pipeline was never recorded.
    recorded = head(sessions, a)
    assert (recorded.state, recorded.pipeline_id) == ("processing", None)
    assert in_flight(sessions) == 1

    with running_manager(
        sessions, registry, fast_config(), handled_types=["trunk"], conninfo=conninfo
    ):
        wait_until(lambda: building(sessions, a), timeout=30, what="recovery")
        (pipeline_id,) = simulator.pipeline_ids(PROJECT, source="api")
        assert head(sessions, a).pipeline_id == pipeline_id  # found again, not re-triggered
        finish_pipeline(simulator, pipeline_id)
        _wake_record(sessions, item_id)  # no hook: the periodic read finds the result
        wait_until(lambda: state_is(sessions, a, "succeeded"), timeout=30, what="recorded")
        wait_until(lambda: settled(sessions), what="settled")
    assert simulator.pipeline_ids(PROJECT, source="api") == [pipeline_id]
    assert in_flight(sessions) == 0


def test_force_push_makes_the_next_admission_full_without_base(sessions, conninfo, simulator):
    registry = trunk_registry(simulator.url)
    with running_manager(
        sessions, registry, fast_config(), handled_types=["trunk"], conninfo=conninfo
    ):
        before_a = simulator.branch_head(PROJECT, "main")
        a = land(simulator)
        _ingest(sessions, registry, a)
        wait_until(lambda: building(sessions, a), what="A building")
        finish_pipeline(simulator, head(sessions, a).pipeline_id)
        _wake_record(sessions, head(sessions, a).id)
        wait_until(lambda: state_is(sessions, a, "succeeded"), what="A green")
        assert queue_row(sessions).last_green_sha == a

        # An amended A: its merge base with A is A's parent, so A is not an ancestor.
        rewritten = simulator.force_push(
            PROJECT, "main", {"README.md": "# rewritten\n"}, onto=before_a
        )
        _ingest(sessions, registry, rewritten)
        wait_until(lambda: building(sessions, rewritten), what="rewrite building")
        found = head(sessions, rewritten)
        assert (found.build_strategy, found.base_sha) == ("full", None)
        assert simulator.pipeline_variables(found.pipeline_id)["WORKQUEUE_BASE_SHA"] == ""
        assert queue_row(sessions).serial_until_green is True
        finish_pipeline(simulator, found.pipeline_id)
        _wake_record(sessions, found.id)
        wait_until(lambda: state_is(sessions, rewritten, "succeeded"), what="rewrite green")
        row = queue_row(sessions)
        assert (row.last_green_sha, row.serial_until_green, row.in_flight) == (rewritten, False, 0)


def _wake_record(sessions, item_id) -> None:
    """Stand in for a missed hook: make the periodic pipeline read due now."""

    def work(session) -> None:
        session.execute(
            sa.text(
                "UPDATE work_item_statuses SET pending_until = NULL, status = 'true' "
                "WHERE work_item_id = :id AND dimension = 'needs_record'"
            ),
            {"id": item_id},
        )
        enqueue.mark_actionable(session, item_id, "trunk")

    run_in_transaction(sessions, work)
