"""From an open MR to merged (or not yet): pipeline and approval events drive reconcile_mr."""

from __future__ import annotations

from urllib.parse import quote

import httpx
import pytest
from harness import wait_until
from mr_harness import PROJECT
from test_mr_lifecycle_support import BRANCH, MERGE_ROUTE, MR_ROUTE, gitlab, lifecycle

from workqueue.queue.models import DimensionStatus, Phase
from workqueue.testing.gitlab_simulator import JobSpec


def merged_sha(call):
    """The `sha` a merge call named (python-gitlab puts it in the query, our client in the body)."""
    return call.query.get("sha") or (call.body or {}).get("sha")


def green_pipeline(world, iid, status="success"):
    return world.simulator.create_pipeline(
        PROJECT, merge_request_iid=iid, jobs=[JobSpec("unit-tests", status=status)]
    )


def test_green_pipeline_on_the_mr_head_merges_and_completes(sessions):
    with gitlab() as simulator, lifecycle(sessions, simulator) as world:
        item_id, iid = world.open_mr()
        mr_sha = world.detail(item_id).mr_sha
        # Open, mergeable, but no pipeline yet: reconcile_mr looked and waits.
        assert world.detail(item_id).detailed_merge_status == "mergeable"
        assert world.merge_calls() == []

        pipeline_id = green_pipeline(world, iid)
        world.send(item_id, world.pipeline_hook(pipeline_id))
        row = world.wait_phase(item_id, Phase.COMPLETED)

        (merge_call,) = world.merge_calls()
        assert merged_sha(merge_call) == mr_sha  # the merge names the tested commit
    assert (row.attempts, row.error) == (0, None)
    detail = world.detail(item_id)
    assert detail.completion_reason == "merged"
    assert (detail.head_pipeline_id, detail.head_pipeline_sha) == (pipeline_id, mr_sha)
    assert detail.head_pipeline_status == "success"
    assert simulator.merge_request(PROJECT, iid)["state"] == "merged"
    assert simulator.read_file(PROJECT, "main", "kernel.spec") == b"Version: 2\n"
    assert simulator.read_file(PROJECT, "main", "patches/new.patch") == b"+fix\n"
    assert simulator.branch_head(PROJECT, BRANCH) is None  # remove_source_branch


def test_pipeline_on_a_stale_sha_never_merges(sessions):
    with gitlab() as simulator, lifecycle(sessions, simulator) as world:
        item_id, iid = world.open_mr()
        stale = green_pipeline(world, iid, status="running")
        # The caller resubmits: a new head replaces the commit that pipeline tests.
        world.submit(title="Sync kernel sources v3")
        world.wait_settled()
        new_sha = world.detail(item_id).mr_sha
        (job,) = simulator.jobs(stale)
        simulator.set_job_status(job["id"], "success")
        world.send(item_id, world.pipeline_hook(stale))
        world.wait_settled()

        assert world.merge_calls() == []
        assert simulator.merge_request(PROJECT, iid)["state"] == "opened"
        assert world.item(item_id).phase == Phase.ACTIVE
        assert world.detail(item_id).head_pipeline_id is None  # the stale one was not taken

        fresh = green_pipeline(world, iid)
        world.send(item_id, world.pipeline_hook(fresh))
        world.wait_phase(item_id, Phase.COMPLETED)
        (merge_call,) = world.merge_calls()
        assert merged_sha(merge_call) == new_sha


def test_gitlab_reporting_a_pipeline_of_an_older_sha_as_head_never_merges(sessions):
    with gitlab() as simulator, lifecycle(sessions, simulator) as world:
        item_id, iid = world.open_mr()
        pipeline_id = green_pipeline(world, iid)
        # GitLab's answer lags behind: mergeable, but its head pipeline ran on another sha.
        answer = simulator.merge_request(PROJECT, iid)
        answer["head_pipeline"] = {**answer["head_pipeline"], "sha": "0" * 39 + "1"}
        simulator.inject_fault("GET", MR_ROUTE, status=200, body=answer, times=None)
        world.send(item_id, world.pipeline_hook(pipeline_id))
        world.wait_settled()
        assert world.merge_calls() == []
        assert world.item(item_id).phase == Phase.ACTIVE

        simulator.faults.clear()
        world.send(item_id, world.mr_hook(iid, "update"))
        world.wait_phase(item_id, Phase.COMPLETED)


def test_not_approved_stays_active_then_merges_after_the_approval_event(sessions):
    settings = {"approvals_required": 1, "only_allow_merge_if_pipeline_succeeds": True}
    with gitlab(**settings) as simulator, lifecycle(sessions, simulator) as world:
        item_id, iid = world.open_mr()
        assert world.detail(item_id).detailed_merge_status == "ci_must_pass"
        pipeline_id = green_pipeline(world, iid)
        world.send(item_id, world.pipeline_hook(pipeline_id))
        world.wait_settled()

        row, detail = world.item(item_id), world.detail(item_id)
        assert (row.phase, row.attempts, row.error) == (Phase.ACTIVE, 0, None)
        assert detail.detailed_merge_status == "not_approved"
        assert detail.head_pipeline_status == "success"
        assert world.dimensions(item_id)[("needs_reconcile", "")].status == "false"
        assert world.merge_calls() == []  # not even tried: GitLab said why not

        simulator.approve(PROJECT, iid)
        world.send(item_id, world.mr_hook(iid, "approved"))
        world.wait_phase(item_id, Phase.COMPLETED)
    assert simulator.merge_request(PROJECT, iid)["state"] == "merged"


def test_draft_mr_is_not_merged_until_a_human_marks_it_ready(sessions):
    with gitlab() as simulator, lifecycle(sessions, simulator) as world:
        item_id, iid = world.open_mr(title="Draft: Sync kernel sources")
        world.send(item_id, world.pipeline_hook(green_pipeline(world, iid)))
        world.wait_settled()
        assert world.detail(item_id).detailed_merge_status == "draft_status"
        assert world.item(item_id).phase == Phase.ACTIVE
        assert world.merge_calls() == []

        simulator.add_user("bob", token="bob-token")
        response = httpx.put(
            f"{simulator.api_url}/projects/{quote(PROJECT, safe='')}/merge_requests/{iid}",
            json={"title": "Sync kernel sources"},
            headers={"PRIVATE-TOKEN": "bob-token"},
        )
        assert response.status_code == 200
        world.send(item_id, world.mr_hook(iid, "update", user="bob"))
        world.wait_phase(item_id, Phase.COMPLETED)


@pytest.mark.parametrize("status", [405, 406, 422])
def test_merge_refusal_is_not_now_and_is_rechecked(sessions, status):
    with gitlab() as simulator, lifecycle(sessions, simulator) as world:
        item_id, iid = world.open_mr()
        simulator.inject_fault("PUT", MERGE_ROUTE, status=status, times=2)
        world.send(item_id, world.pipeline_hook(green_pipeline(world, iid)))
        row = world.wait_phase(item_id, Phase.COMPLETED)
        # Two refusals, retried after 0.2 s then 0.4 s (the backoff starts at the harness's
        # re-check delay here, 30 s in production), then the merge: never an attempt or error.
        assert len(world.merge_calls()) == 3
    assert (row.attempts, row.error) == (0, None)


# A 409 (sha mismatch) re-reads the MR first: test_merge_paths_refusals.py.


def test_transient_merge_status_is_deferred_not_dropped(sessions):
    # Each change makes the MR report `checking` for the next 5 reads.
    with gitlab(checking_reads=5) as simulator, lifecycle(sessions, simulator) as world:
        item_id = world.submit()
        wait_until(lambda: world.detail(item_id).mr_iid is not None, what="the MR")
        iid = world.detail(item_id).mr_iid
        green_pipeline(world, iid)
        # No event: only reconcile_mr's own deferrals look again until GitLab is done.
        row = world.wait_phase(item_id, Phase.COMPLETED)
        reads = simulator.request_count("GET", MR_ROUTE)
    assert reads >= 6
    assert (row.attempts, row.error) == (0, None)
    assert world.detail(item_id).completion_reason == "merged"


def test_auto_merge_off_never_merges_but_records_the_status(sessions):
    with gitlab() as simulator, lifecycle(sessions, simulator) as world:
        item_id, iid = world.open_mr(auto_merge=False)
        world.send(item_id, world.pipeline_hook(green_pipeline(world, iid)))
        world.wait_settled()
        assert world.merge_calls() == []
        assert world.detail(item_id).head_pipeline_status == "success"
        assert world.item(item_id).phase == Phase.ACTIVE


def test_merged_by_a_human_completes(sessions):
    with gitlab() as simulator, lifecycle(sessions, simulator) as world:
        item_id, iid = world.open_mr()
        simulator.merge(PROJECT, iid)
        world.send(item_id, world.mr_hook(iid, "merge"))
        world.wait_phase(item_id, Phase.COMPLETED)
        assert world.merge_calls() == []
    assert world.detail(item_id).completion_reason == "merged"


def test_closed_by_a_human_cancels(sessions):
    with gitlab() as simulator, lifecycle(sessions, simulator) as world:
        item_id, iid = world.open_mr()
        simulator.close_merge_request(PROJECT, iid)
        world.send(item_id, world.mr_hook(iid, "close"))
        row = world.wait_phase(item_id, Phase.CANCELLED)
    assert (row.attempts, row.error) == (0, None)
    assert world.detail(item_id).completion_reason is None


def test_merge_missed_by_events_is_found_by_reconcile(sessions):
    # The merge hook was lost (or judged stale): the next look at the MR notices.
    with gitlab() as simulator, lifecycle(sessions, simulator) as world:
        item_id, iid = world.open_mr()
        simulator.merge(PROJECT, iid)
        world.set_dimension(item_id, "needs_reconcile", DimensionStatus.TRUE)
        world.wait_phase(item_id, Phase.COMPLETED)
    assert world.detail(item_id).completion_reason == "merged"


def test_close_missed_by_events_is_found_by_reconcile(sessions):
    with gitlab() as simulator, lifecycle(sessions, simulator) as world:
        item_id, iid = world.open_mr()
        simulator.close_merge_request(PROJECT, iid)
        world.set_dimension(item_id, "needs_reconcile", DimensionStatus.TRUE)
        world.wait_phase(item_id, Phase.CANCELLED)
