"""Security review of issue 22: drift checks must not be defeated by other reads of the MR
(real PostgreSQL, the simulator).

A drift check raises `needs_reconcile` only for GitLab state the item does not know yet.
Any other executor that reads the MR and stores what it saw without looking at it
would make that state "known" while nothing acted on it: a green pipeline whose hook
was lost would then wait forever.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1] / "integration" / "mr"))

from harness import wait_until
from mr_harness import PROJECT
from test_mr_lifecycle_support import BRANCH, gitlab, lifecycle

from workqueue.queue.models import Phase
from workqueue.testing.gitlab_simulator import JobSpec


def test_an_empty_diff_check_that_sees_a_green_pipeline_first_does_not_stall_the_merge(
    sessions,
):
    with gitlab() as simulator, lifecycle(sessions, simulator, drift_check_seconds=2) as world:
        item_id, iid = world.open_mr()
        simulator.create_pipeline(
            PROJECT, merge_request_iid=iid, jobs=[JobSpec("unit-tests", status="success")]
        )
        # GitLab lost the Pipeline Hook; a person then pushed to the target branch, whose
        # hook arrived: the empty-diff check reads the MR before any drift check does.
        main_before = simulator.branch_head(PROJECT, "main")
        simulator.push(PROJECT, "main", {"README.md": "# project, upstream\n"})
        world.send(item_id, world.push_hook("main", before=main_before))
        world.wait_phase(item_id, Phase.COMPLETED)
        assert world.detail(item_id).completion_reason == "merged"
        assert len(world.merge_calls()) == 1


def test_a_stream_of_failed_job_hooks_does_not_hide_a_green_pipeline(sessions):
    """Every applied hook pushes the drift check back; hooks that only ask for a CI retry
    (a failed job of the recorded head pipeline, real or forged with the project's
    secret) must not keep a green pipeline whose hook was lost from being acted on."""
    with gitlab() as simulator, lifecycle(sessions, simulator, drift_check_seconds=1) as world:
        item_id, iid = world.open_mr()
        pipeline_id = simulator.create_pipeline(
            PROJECT, merge_request_iid=iid, jobs=[JobSpec("unit-tests", status="running")]
        )
        world.send(item_id, world.pipeline_hook(pipeline_id))
        wait_until(
            lambda: world.detail(item_id).head_pipeline_id == pipeline_id,
            what="the head pipeline recorded",
        )
        world.wait_settled()
        job_id = simulator.jobs(pipeline_id)[0]["id"]
        simulator.set_job_status(job_id, "success")  # green; its Pipeline Hook was lost
        forged = simulator.job_hook(job_id)
        forged.update(build_status="failed", build_failure_reason="script_failure")
        deadline = time.monotonic() + 4  # four drift periods
        while world.item(item_id).phase == Phase.ACTIVE and time.monotonic() < deadline:
            world.send(item_id, ("build", forged))
            world.wait_settled()
        # Not merely once the stream stops: while it lasts (the bound is one period).
        assert world.item(item_id).phase == Phase.COMPLETED
        assert world.detail(item_id).completion_reason == "merged"


def drift(world, name):
    return world.registry.get("mr").counters[name].read()


def test_a_foreign_head_is_one_correction_not_one_every_drift_period(sessions):
    """A person's push whose hook was lost is found once; the drift checks after it must
    not find it again every period (a reconcile, an audit entry and a correction each
    time: GitLab calls doubled and the lost-hooks alert firing for ever)."""
    with gitlab() as simulator, lifecycle(sessions, simulator, drift_check_seconds=0.2) as world:
        item_id, _ = world.open_mr()
        simulator.push(PROJECT, BRANCH, {"patches/mine.patch": "+mine\n"}, message="Mine")
        wait_until(
            lambda: (world.detail(item_id).merge_blocker or {}).get("code") == "foreign_commits",
            what="the foreign head found",
        )
        start = drift(world, "drift_checks")[()]
        wait_until(
            lambda: drift(world, "drift_checks")[()] >= start + 3, what="three more drift checks"
        )
        assert drift(world, "drift_corrections")[("head",)] == 1
        assert world.item(item_id).phase == Phase.ACTIVE
