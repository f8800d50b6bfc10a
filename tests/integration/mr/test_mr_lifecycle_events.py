"""Event ordering and terminal items, someone else's pushes, and empty diffs (DDR-37/43)."""

from __future__ import annotations

from datetime import UTC, datetime

from harness import wait_until
from mr_harness import PROJECT
from test_mr_lifecycle_support import (
    BRANCH,
    COMPARE_ROUTE,
    MR_CONTENT,
    gitlab,
    lifecycle,
)

from workqueue.queue.models import DimensionStatus, Phase
from workqueue.testing.gitlab_simulator import JobSpec
from workqueue.types.mr.executors.outcomes import EMPTY_DIFF_NOTE

# -- ordering and terminal items -------------------------------------------------------


def test_older_pipeline_event_after_a_newer_one_does_not_regress(sessions):
    # reconcile_mr is stubbed: it would re-read the truth from GitLab and hide
    # what the event layer did. Here only the events speak.
    with gitlab() as simulator, lifecycle(sessions, simulator, stub_reconcile=True) as world:
        item_id, iid = world.open_mr()
        pipeline_id = simulator.create_pipeline(
            PROJECT, merge_request_iid=iid, jobs=[JobSpec("unit-tests", status="running")]
        )
        _, running = world.pipeline_hook(pipeline_id)
        (job,) = simulator.jobs(pipeline_id)
        simulator.set_job_status(job["id"], "success")
        _, finished = world.pipeline_hook(pipeline_id)
        # Second resolution in hooks: make "finished" strictly later than "created".
        finished["object_attributes"]["finished_at"] = "2999-01-01 00:00:00 UTC"

        world.send(item_id, ("pipeline", finished))
        world.wait_settled()
        world.send(item_id, ("pipeline", running))
        world.wait_settled()
        detail = world.detail(item_id)
        assert detail.head_pipeline_status == "success"
        assert detail.head_pipeline_id == pipeline_id
        assert world.item(item_id).last_event_at == datetime(2999, 1, 1, tzinfo=UTC)
        assert world.pending_event_count() == 0


def test_two_state_carrying_events_drained_in_one_step(sessions):
    with gitlab() as simulator, lifecycle(sessions, simulator, stub_reconcile=True) as world:
        item_id, iid = world.open_mr()
        pipeline_id = simulator.create_pipeline(
            PROJECT, merge_request_iid=iid, jobs=[JobSpec("unit-tests", status="running")]
        )
        running = world.pipeline_hook(pipeline_id)
        (job,) = simulator.jobs(pipeline_id)
        simulator.set_job_status(job["id"], "success")
        # Both hooks land before the item's loop runs: one drain applies both.
        world.send(item_id, running, world.pipeline_hook(pipeline_id))
        world.wait_settled(timeout=10)
        row = world.item(item_id)
        assert (row.phase, row.error) == (Phase.ACTIVE, None)
        assert world.detail(item_id).head_pipeline_status == "success"


def test_older_foreign_head_event_does_not_replace_a_newer_one(sessions):
    with gitlab() as simulator, lifecycle(sessions, simulator) as world:
        item_id, iid = world.open_mr()
        ours = world.detail(item_id).mr_sha
        first = simulator.push(PROJECT, BRANCH, {"human.txt": "one\n"}, message="Human 1")
        _, older = world.mr_hook(iid, "update", oldrev=ours)
        second = simulator.push(PROJECT, BRANCH, {"human.txt": "two\n"}, message="Human 2")
        _, newer = world.mr_hook(iid, "update", oldrev=ours)  # as if force-pushed over ours
        older["object_attributes"]["updated_at"] = "2999-01-01T00:00:00Z"
        newer["object_attributes"]["updated_at"] = "2999-01-01T00:00:01Z"
        assert older["object_attributes"]["last_commit"]["id"] == first

        world.send(item_id, ("merge_request", newer))
        world.wait_settled()
        world.send(item_id, ("merge_request", older))
        world.wait_settled()
        assert world.detail(item_id).foreign_head_sha == second


def test_events_for_completed_and_cancelled_items_are_ignored(sessions):
    with gitlab() as simulator, lifecycle(sessions, simulator) as world:
        merged_id, merged_iid = world.open_mr()
        closed_id, closed_iid = world.open_mr(source_branch="workqueue/other")
        simulator.merge(PROJECT, merged_iid)
        world.send(merged_id, world.mr_hook(merged_iid, "merge"))
        world.wait_phase(merged_id, Phase.COMPLETED)
        simulator.close_merge_request(PROJECT, closed_iid)
        world.send(closed_id, world.mr_hook(closed_iid, "close"))
        world.wait_phase(closed_id, Phase.CANCELLED)
        before = {item_id: world.detail(item_id) for item_id in (merged_id, closed_id)}
        pipeline_id = simulator.create_pipeline(
            PROJECT, merge_request_iid=closed_iid, jobs=[JobSpec("unit-tests", status="failed")]
        )
        simulator.reset_requests()

        for item_id, iid in ((merged_id, merged_iid), (closed_id, closed_iid)):
            world.send(
                item_id,
                world.mr_hook(iid, "reopen"),
                world.mr_hook(iid, "approved"),
                world.pipeline_hook(pipeline_id),
                world.push_hook("main", before="0" * 40),
            )
        world.wait_settled()
        assert world.item(merged_id).phase == Phase.COMPLETED
        assert world.item(closed_id).phase == Phase.CANCELLED
        assert {item_id: world.detail(item_id) for item_id in before} == before
        assert world.pending_event_count() == 0  # drained, not left behind
        assert simulator.request_count() == 0  # no executor ran


# -- someone else's commits on the bot branch --------------------------------------------


def test_foreign_push_is_never_force_pushed_over_or_merged(sessions):
    with gitlab() as simulator, lifecycle(sessions, simulator) as world:
        item_id, iid = world.open_mr()
        ours = world.detail(item_id).mr_sha
        theirs = simulator.push(PROJECT, BRANCH, {"kernel.spec": "Version: 2-hotfix\n"})
        world.send(item_id, world.push_hook(BRANCH, before=ours))
        world.wait_settled()
        assert world.detail(item_id).foreign_head_sha == theirs

        # A green pipeline on their commit is not ours to merge (and its hook is ignored).
        simulator.create_pipeline(
            PROJECT, merge_request_iid=iid, jobs=[JobSpec("unit-tests", status="success")]
        )
        world.send(item_id, world.mr_hook(iid, "update"))
        world.wait_settled()
        assert world.merge_calls() == []
        assert simulator.merge_request(PROJECT, iid)["state"] == "opened"

        # ensure_mr runs again (as after a failure): it pushes nothing over their
        # commit and fails the item, naming it.
        simulator.reset_requests()
        world.set_dimension(item_id, "needs_mr", DimensionStatus.TRUE)
        row = world.wait_phase(item_id, Phase.FAILED)
        assert simulator.log.writes() == []
        assert simulator.branch_head(PROJECT, BRANCH) == theirs
        assert theirs in row.error
        assert world.detail(item_id).foreign_head_sha == theirs


def test_our_own_push_events_are_not_taken_for_someone_elses(sessions):
    with gitlab() as simulator, lifecycle(sessions, simulator) as world:
        item_id, iid = world.open_mr()
        first = world.detail(item_id).mr_sha
        world.submit(title="v2", commit_message="Second message")
        world.wait_settled()
        second = world.detail(item_id).mr_sha
        world.submit(title="v3", commit_message="Third message")
        world.wait_settled()
        third = world.detail(item_id).mr_sha
        assert len({first, second, third}) == 3
        # The hooks of our earlier pushes arrive late and out of order.
        world.send(
            item_id,
            world.push_hook(BRANCH, before=second, after=third),
            world.push_hook(BRANCH, before=first, after=second),
            world.mr_hook(iid, "update", oldrev=first),
            world.push_hook(BRANCH, before="0" * 40, after=first),
        )
        world.wait_settled()
        assert world.detail(item_id).foreign_head_sha is None
        assert world.detail(item_id).mr_sha == third


# -- empty diffs ------------------------------------------------------------------------------


def test_push_to_the_target_making_the_diff_empty_closes_and_completes(sessions):
    with gitlab() as simulator, lifecycle(sessions, simulator) as world:
        item_id, iid = world.open_mr()
        wait_until(
            lambda: world.detail(item_id).merge_blocker is not None,
            what="the MR to wait for its pipeline",
        )
        main_before = simulator.branch_head(PROJECT, "main")
        simulator.push(PROJECT, "main", MR_CONTENT, message="Upstream landed the same change")
        world.send(item_id, world.push_hook("main", before=main_before))
        world.wait_phase(item_id, Phase.COMPLETED)
    assert world.detail(item_id).completion_reason == "empty_diff"
    # Nothing is left to merge: no reason not to merge is shown for a finished item.
    assert world.detail(item_id).merge_blocker is None
    assert simulator.merge_request(PROJECT, iid)["state"] == "closed"
    assert any(note["body"] == EMPTY_DIFF_NOTE for note in simulator.notes(PROJECT, iid))
    assert simulator.branch_head(PROJECT, BRANCH) is None
    assert world.merge_calls() == []


def test_push_to_the_target_with_other_changes_keeps_the_mr(sessions):
    with gitlab() as simulator, lifecycle(sessions, simulator) as world:
        item_id, iid = world.open_mr()
        main_before = simulator.branch_head(PROJECT, "main")
        simulator.push(PROJECT, "main", {"README.md": "# project, upstream\n"})
        world.send(item_id, world.push_hook("main", before=main_before))
        world.wait_settled()
        assert world.item(item_id).phase == Phase.ACTIVE
        assert simulator.merge_request(PROJECT, iid)["state"] == "opened"
        check = world.dimensions(item_id)[("needs_empty_check", "")]
        assert check.status == "true"
        assert check.pending_until is not None  # rescheduled one interval ahead


def test_periodic_empty_check_reschedules_and_finds_an_empty_diff(sessions):
    with (
        gitlab() as simulator,
        lifecycle(sessions, simulator, empty_check_interval_seconds=0.3) as world,
    ):
        item_id, iid = world.open_mr()

        def scheduled() -> datetime | None:
            # Between a check being woken (pending_until cleared) and its
            # reschedule committing, the row briefly has no pending_until.
            return world.dimensions(item_id)[("needs_empty_check", "")].pending_until

        seen: list[datetime] = []

        def noted_when_scheduled() -> bool:
            at = scheduled()
            if at is not None:
                seen.append(at)
            return at is not None

        wait_until(noted_when_scheduled, timeout=15, what="a check to be scheduled")
        first = seen[0]
        wait_until(
            lambda: simulator.request_count("GET", COMPARE_ROUTE) >= 4,
            timeout=15,
            what="a few periodic checks",
        )

        def rescheduled_later() -> bool:
            later = scheduled()
            return later is not None and later > first

        wait_until(rescheduled_later, timeout=15, what="the next check to be scheduled")
        assert world.item(item_id).phase == Phase.ACTIVE

        # Upstream lands the same content and no hook arrives: the next check finds it.
        simulator.push(PROJECT, "main", MR_CONTENT)
        world.wait_phase(item_id, Phase.COMPLETED)
    assert world.detail(item_id).completion_reason == "empty_diff"
    assert simulator.merge_request(PROJECT, iid)["state"] == "closed"


def test_our_own_close_whose_step_failed_still_ends_as_empty_diff(sessions):
    with gitlab() as simulator, lifecycle(sessions, simulator) as world:
        item_id, iid = world.open_mr()
        # The branch delete fails once: the MR is closed, but the step rolls back.
        simulator.inject_fault("DELETE", "/projects/:id/repository/branches/:branch", status=500)
        main_before = simulator.branch_head(PROJECT, "main")
        simulator.push(PROJECT, "main", MR_CONTENT)
        world.send(item_id, world.push_hook("main", before=main_before))
        wait_until(
            lambda: simulator.merge_request(PROJECT, iid)["state"] == "closed", what="the close"
        )
        # GitLab's hook for that close (by the service's user) must not cancel the item.
        world.send(item_id, world.mr_hook(iid, "close", user=simulator.bot.username))
        world.wait_phase(item_id, Phase.COMPLETED)
    assert world.detail(item_id).completion_reason == "empty_diff"
    assert simulator.branch_head(PROJECT, BRANCH) is None
