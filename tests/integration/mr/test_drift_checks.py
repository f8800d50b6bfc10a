"""Drift checks: an item no webhook speaks of is re-read from GitLab, so a lost hook delays
a merge by about `drift_check_seconds`, never forever (real PostgreSQL, the simulator).

Hooks here are stored for the item the way the receiver stores them
(`Lifecycle.send`); a hook GitLab lost is simply never sent.
"""

from __future__ import annotations

import time

from harness import wait_until
from mr_harness import PROJECT
from sqlalchemy import event
from test_mr_lifecycle_support import MR_ROUTE, gitlab, lifecycle

from workqueue.queue.models import DimensionStatus, Phase
from workqueue.testing.gitlab_simulator import JobSpec

DRIFT = "needs_drift_check", ""
# Short enough for a test to wait out a few periods; production's default is 300 s.
QUICK = 0.2


def counter(world, name):
    return world.registry.get("mr").counters[name].read()


def checks(world):
    return counter(world, "drift_checks")[()]


def test_a_green_pipeline_whose_hook_was_lost_merges_after_a_drift_check(sessions):
    with gitlab() as simulator, lifecycle(sessions, simulator, drift_check_seconds=QUICK) as world:
        item_id, iid = world.open_mr()
        assert world.merge_calls() == []  # no pipeline yet: waiting for its hook
        simulator.create_pipeline(
            PROJECT, merge_request_iid=iid, jobs=[JobSpec("unit-tests", status="success")]
        )
        # GitLab lost the Pipeline Hook: nothing is sent.
        world.wait_phase(item_id, Phase.COMPLETED)
        assert world.detail(item_id).completion_reason == "merged"
        assert len(world.merge_calls()) == 1
        assert counter(world, "drift_corrections")[("pipeline",)] == 1
        assert simulator.merge_requests(PROJECT)[0]["state"] == "merged"


def test_a_merge_no_hook_reported_completes_the_item(sessions):
    with gitlab() as simulator, lifecycle(sessions, simulator, drift_check_seconds=QUICK) as world:
        item_id, iid = world.open_mr()
        simulator.merge(PROJECT, iid)  # a person merged it; the MR Hook was lost
        world.wait_phase(item_id, Phase.COMPLETED)
        assert world.merge_calls() == []
        assert counter(world, "drift_corrections")[("merged",)] == 1


def test_with_nothing_new_each_drift_check_is_one_mr_read(sessions):
    with gitlab() as simulator, lifecycle(sessions, simulator, drift_check_seconds=QUICK) as world:
        item_id, iid = world.open_mr()
        # The first check only recorded the project's id (the cached project read).
        project_id = simulator.merge_request(PROJECT, iid)["project_id"]
        assert world.detail(item_id).project_id == project_id
        simulator.reset_requests()
        start = checks(world)
        wait_until(lambda: checks(world) >= start + 3, what="three drift checks")
        done = checks(world) - start
        reads = simulator.request_count("GET", MR_ROUTE)
        after = checks(world) - start
        # A check reads the MR before it is counted: at most one read is not counted yet.
        assert done <= reads <= after + 1
        assert simulator.request_count() == reads  # and nothing else is asked
        assert all(count == 0 for count in counter(world, "drift_corrections").values())
        assert world.item(item_id).phase == Phase.ACTIVE


def test_every_webhook_pushes_the_drift_check_back(sessions):
    with gitlab() as simulator, lifecycle(sessions, simulator, drift_check_seconds=600) as world:
        item_id, iid = world.open_mr()
        first = world.dimensions(item_id)[DRIFT].pending_until
        assert first is not None
        world.send(item_id, world.mr_hook(iid, "update"))
        wait_until(
            lambda: world.dimensions(item_id)[DRIFT].pending_until > first,
            what="the drift check pushed back",
        )
        world.wait_settled()
        assert checks(world) == 0


def test_drift_checks_can_be_turned_off(sessions):
    with gitlab() as simulator, lifecycle(sessions, simulator, drift_check_seconds=0) as world:
        item_id, iid = world.open_mr()
        row = world.dimensions(item_id)[DRIFT]
        assert (row.status, row.pending_until) == (DimensionStatus.FALSE, None)
        world.send(item_id, world.mr_hook(iid, "update"))
        world.wait_settled()
        row = world.dimensions(item_id)[DRIFT]
        assert (row.status, row.pending_until) == (DimensionStatus.FALSE, None)
        assert checks(world) == 0


def test_with_no_active_item_no_sql_runs_between_safety_sweeps(sessions, engine):
    with gitlab() as simulator, lifecycle(sessions, simulator, drift_check_seconds=QUICK) as world:
        item_id, iid = world.open_mr()
        simulator.merge(PROJECT, iid)
        world.wait_phase(item_id, Phase.COMPLETED)  # found by a drift check
        # The timer set for the item's last deferral fires once more, finds nothing due.
        time.sleep(2 * QUICK)
        reads = simulator.request_count()
        statements: list[str] = []
        listener = lambda *args: statements.append(args[2])  # noqa: E731 - one line
        event.listen(engine, "before_cursor_execute", listener)
        try:
            time.sleep(5 * QUICK)  # five drift periods: a finished item is never re-read
        finally:
            event.remove(engine, "before_cursor_execute", listener)
        assert statements == []
        assert simulator.request_count() == reads  # nor any GitLab call
