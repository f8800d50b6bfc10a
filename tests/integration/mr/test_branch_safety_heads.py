"""ensure_mr never pushes over commits the service did not make (v1.1 trust boundary).

Each test builds the situation on the simulated GitLab, lets the real engine run
ensure_mr through python-gitlab, then checks what GitLab holds and what was
written. A person's commits are made with the simulator's `push` helper (as
user `ada`, no webhook delivered unless a test sends one).
"""

from __future__ import annotations

from typing import Any

import pytest
from harness import wait_until
from mr_harness import PROJECT
from test_mr_lifecycle_support import (
    BRANCH,
    COMMITS_ROUTE,
    COMPARE_ROUTE,
    MR_CONTENT,
    gitlab,
    lifecycle,
)

from workqueue.queue import enqueue
from workqueue.queue.models import Phase
from workqueue.types.mr.authorship import stamped_item


def retry_like_the_api(world: Any, item_id: Any) -> None:
    """What `POST /api/work-items/{id}/retry` does to a failed or cancelled item."""
    registration = world.registry.get("mr")
    with world.sessions() as session:
        item = session.get(registration.model, item_id)
        registration.retry_hook(session, item)
        enqueue.mark_actionable(session, item_id, "mr", reactivate=True)
        session.commit()
    world.manager.notify(item_id)


def test_a_persons_branch_named_by_a_submission_is_left_alone(sessions):
    # No prefix, so a caller can name any branch: the head check alone protects it.
    with (
        gitlab() as simulator,
        lifecycle(sessions, simulator, source_branch_prefix="") as world,
    ):
        theirs = simulator.push(PROJECT, "feature/login", {"login.py": "x = 1\n"}, message="Login")
        before = simulator.branches(PROJECT)
        simulator.reset_requests()
        item_id = world.submit(source_branch="feature/login")
        row = world.wait_phase(item_id, Phase.FAILED)
        assert theirs in row.error
        assert world.detail(item_id).foreign_head_sha == theirs
        assert simulator.log.writes() == []
        assert simulator.branches(PROJECT) == before
        assert simulator.merge_requests(PROJECT) == []


def test_a_retry_and_a_resubmission_fail_again_while_the_foreign_head_is_there(sessions):
    with gitlab() as simulator, lifecycle(sessions, simulator) as world:
        item_id, iid = world.open_mr()
        ours = world.detail(item_id).mr_sha
        # A person fixes something on the bot branch; the push hook is lost.
        theirs = simulator.push(PROJECT, BRANCH, {"kernel.spec": "Version: 2-fix\n"})
        simulator.reset_requests()

        world.submit(title="Sync kernel sources v3")  # new content: ensure_mr runs
        row = world.wait_phase(item_id, Phase.FAILED)
        assert theirs in row.error
        assert world.detail(item_id).foreign_head_sha == theirs

        retry_like_the_api(world, item_id)
        row = world.wait_phase(item_id, Phase.FAILED)
        assert theirs in row.error

        world.submit(title="Sync kernel sources v4")  # a failed item is revived: retried
        row = world.wait_phase(item_id, Phase.FAILED)
        assert theirs in row.error

        assert simulator.request_count("POST", COMMITS_ROUTE) == 0
        assert simulator.log.writes() == []
        assert simulator.branch_head(PROJECT, BRANCH) == theirs
        assert simulator.merge_request(PROJECT, iid)["title"] == "Sync kernel sources"
        assert world.detail(item_id).mr_sha == ours


def test_the_branch_is_taken_back_once_the_foreign_head_is_gone(sessions):
    with gitlab() as simulator, lifecycle(sessions, simulator) as world:
        item_id, _ = world.open_mr()
        theirs = simulator.push(PROJECT, BRANCH, {"kernel.spec": "Version: 2-fix\n"})
        world.submit(title="v3")
        world.wait_phase(item_id, Phase.FAILED)
        assert world.detail(item_id).foreign_head_sha == theirs

        simulator.delete_branch(PROJECT, BRANCH)  # the person hands the branch back
        retry_like_the_api(world, item_id)
        wait_until(lambda: world.item(item_id).phase == Phase.ACTIVE, what="the retry")
        world.wait_settled()
        row, detail = world.item(item_id), world.detail(item_id)
        assert (row.phase, row.error) == (Phase.ACTIVE, None)
        assert detail.foreign_head_sha is None
        assert simulator.branch_head(PROJECT, BRANCH) == detail.mr_sha
        assert len(simulator.merge_requests(PROJECT, state="opened")) == 1


def test_a_copied_message_with_our_trailer_does_not_make_a_persons_commit_ours(sessions):
    with gitlab() as simulator, lifecycle(sessions, simulator) as world:
        item_id, _ = world.open_mr()
        (ours,) = simulator.log_commits(PROJECT, BRANCH, exclude="main")
        assert stamped_item(ours.message) == item_id
        # Same message, trailer included, but committed by a person.
        theirs = simulator.push(PROJECT, BRANCH, {"kernel.spec": "x\n"}, message=ours.message)
        world.submit(title="v3")
        row = world.wait_phase(item_id, Phase.FAILED)
        assert theirs in row.error
        assert simulator.branch_head(PROJECT, BRANCH) == theirs


def test_a_rolled_back_push_is_recognised_as_the_services_own(sessions):
    with gitlab() as simulator, lifecycle(sessions, simulator) as world:
        # The compare after the commit fails: the step (and its record of the
        # commit) rolls back, the commit stays on GitLab.
        simulator.inject_fault("GET", COMPARE_ROUTE, status=502)
        item_id = world.submit()
        world.wait_settled()
        row, detail = world.item(item_id), world.detail(item_id)
        assert (row.phase, row.attempts, row.error) == (Phase.ACTIVE, 0, None)
        # Recognised as its own and, holding this content on the target, kept.
        assert simulator.request_count("POST", COMMITS_ROUTE) == 1
        assert len(simulator.merge_requests(PROJECT)) == 1
        (commit,) = simulator.log_commits(PROJECT, BRANCH, exclude="main")
        assert commit.id == detail.mr_sha
        assert stamped_item(commit.message) == item_id
        assert commit.message.startswith("Sync sources from upstream\n\nWorkqueue-Content: ")


def test_a_branch_left_by_a_cancelled_generation_is_the_services(sessions):
    with gitlab() as simulator, lifecycle(sessions, simulator) as world:
        first_id, iid = world.open_mr()
        with world.sessions() as session:
            enqueue.cancel_item(session, first_id)  # cancel, leaving the MR open
            session.commit()
        second_id = world.submit(title="Second generation")
        assert second_id != first_id
        world.wait_settled()
        row, detail = world.item(second_id), world.detail(second_id)
        assert (row.phase, row.error) == (Phase.ACTIVE, None)
        assert detail.mr_iid == iid  # the service's own open MR is adopted
        assert simulator.merge_request(PROJECT, iid)["title"] == "Second generation"


@pytest.mark.parametrize(
    ("source", "target"),
    [
        ("workqueue/trunk", None),  # the omitted target resolves to the source
        ("workqueue/trunk", "release"),  # the source is the default branch
    ],
)
def test_the_default_branch_is_never_the_source(sessions, source, target):
    with gitlab(default_branch="workqueue/trunk") as simulator:
        simulator.create_branch(PROJECT, "release")
        with lifecycle(sessions, simulator) as world:
            simulator.reset_requests()
            item_id = world.submit(source_branch=source, target_branch=target)
            row = world.wait_phase(item_id, Phase.FAILED)
            assert "default branch" in row.error or "target branch" in row.error
            assert simulator.log.writes() == []
            assert simulator.merge_requests(PROJECT) == []


def test_an_empty_diff_keeps_a_bot_branch_that_holds_someone_elses_commit(sessions):
    with gitlab() as simulator, lifecycle(sessions, simulator) as world:
        item_id, iid = world.open_mr()
        # A person adds a file to the bot branch; upstream lands all of it on main.
        theirs = simulator.push(PROJECT, BRANCH, {"human.txt": "by hand\n"})
        main_before = simulator.branch_head(PROJECT, "main")
        simulator.push(PROJECT, "main", {**MR_CONTENT, "human.txt": "by hand\n"})
        world.send(item_id, world.push_hook("main", before=main_before))
        world.wait_phase(item_id, Phase.COMPLETED)
        assert world.detail(item_id).completion_reason == "empty_diff"
        assert simulator.merge_request(PROJECT, iid)["state"] == "closed"  # the service's MR
        assert simulator.branch_head(PROJECT, BRANCH) == theirs  # their commit is kept
        assert simulator.request_count("DELETE", "/projects/:id/repository/branches/:branch") == 0
