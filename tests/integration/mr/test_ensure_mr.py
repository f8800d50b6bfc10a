"""From submission to an open MR, against the GitLab simulator through python-gitlab."""

from __future__ import annotations

import base64

import pytest
import sqlalchemy as sa
from harness import fast_config, item_row, running_manager, settled, wait_until
from mr_harness import PROJECT, TOKEN, body, mr_registry, submit

from workqueue.queue.models import Phase
from workqueue.types.mr.submit import SubmissionRejectedError

COMMITS_ROUTE = "/projects/:id/repository/commits"
MRS_ROUTE = "/projects/:id/merge_requests"


@pytest.fixture
def registry(simulator):
    # One test pushes binary content (content_rules refuse it elsewhere).
    return mr_registry(simulator, content={"binary_paths": ["*.bin"]})


def process(sessions, registry, submission, **config):
    with running_manager(sessions, registry, fast_config(**config), handled_types=["mr"]) as mgr:
        result = submit(sessions, registry, submission)
        mgr.notify(result.item.id)
        wait_until(lambda: settled(sessions), timeout=30, what="the item to settle")
    return result


def detail(sessions, item_id):
    with sessions() as session:
        return session.execute(
            sa.text("SELECT * FROM mr_details WHERE id = :id"), {"id": item_id}
        ).one()


def test_submission_becomes_one_commit_on_the_branch_and_an_mr(sessions, registry, simulator):
    result = process(sessions, registry, body())
    row, mr_row = item_row(sessions, result.item.id), detail(sessions, result.item.id)
    assert (row.phase, row.attempts, row.error, row.actionable) == (Phase.ACTIVE, 0, None, False)

    (merge_request,) = simulator.merge_requests(PROJECT, state="opened")
    assert merge_request["iid"] == mr_row.mr_iid
    assert merge_request["web_url"] == mr_row.mr_url
    assert merge_request["title"] == "Sync kernel sources"
    assert merge_request["description"] == "Automated sync"
    assert sorted(merge_request["labels"]) == ["bot", "sync"]
    assert merge_request["source_branch"] == "workqueue/sync-kernel"
    assert merge_request["target_branch"] == "main"
    assert merge_request["force_remove_source_branch"] is True

    main = simulator.branch_head(PROJECT, "main")
    commits = simulator.log_commits(PROJECT, "workqueue/sync-kernel", exclude="main")
    assert len(commits) == 1
    assert commits[0].id == mr_row.mr_sha == simulator.branch_head(PROJECT, "workqueue/sync-kernel")
    assert commits[0].parent_ids == (main,)
    assert simulator.files(PROJECT, "workqueue/sync-kernel") == {
        "README.md": b"# project\n",
        "kernel.spec": b"Version: 2\n",
        "patches/keep.patch": b"--- a\n+++ b\n",
        "patches/new.patch": b"+fix\n",
    }
    assert mr_row.target_branch == "main"


def test_unchanged_resubmission_makes_no_gitlab_call(sessions, registry, simulator):
    process(sessions, registry, body())
    simulator.reset_requests()
    again = process(sessions, registry, body())
    assert again.outcome == "unchanged"
    assert simulator.request_count() == 0


def test_changed_resubmission_replaces_the_branch_content_and_keeps_the_mr(
    sessions, registry, simulator
):
    first = process(sessions, registry, body())
    binary = bytes(range(256))
    changed = body(
        title="Sync kernel sources v3",
        file_actions=[
            {"action": "update", "file_path": "kernel.spec", "content": "Version: 3\n"},
            {
                "action": "create",
                "file_path": "blob.bin",
                "content": base64.b64encode(binary).decode(),
                "encoding": "base64",
            },
        ],
    )
    second = process(sessions, registry, changed)
    assert second.outcome == "updated"
    assert second.item.id == first.item.id
    (merge_request,) = simulator.merge_requests(PROJECT, state="opened")
    assert merge_request["iid"] == detail(sessions, first.item.id).mr_iid
    assert merge_request["title"] == "Sync kernel sources v3"
    # Exactly the new content on top of main: the v2 commit and patches/new.patch are gone.
    assert len(simulator.log_commits(PROJECT, "workqueue/sync-kernel", exclude="main")) == 1
    assert simulator.files(PROJECT, "workqueue/sync-kernel") == {
        "README.md": b"# project\n",
        "kernel.spec": b"Version: 3\n",
        "patches/keep.patch": b"--- a\n+++ b\n",
        "blob.bin": binary,
    }


def test_transient_errors_are_retried_and_attempts_reset(sessions, registry, simulator):
    simulator.inject_fault("POST", COMMITS_ROUTE, status=500, times=2)
    result = process(sessions, registry, body(), backoff_initial_seconds=0.05)
    row = item_row(sessions, result.item.id)
    assert (row.phase, row.attempts, row.error) == (Phase.ACTIVE, 0, None)
    assert len(simulator.merge_requests(PROJECT, state="opened")) == 1
    assert simulator.request_count("POST", COMMITS_ROUTE) == 3


def test_a_push_whose_step_failed_is_not_pushed_again(sessions, registry, simulator):
    # The commit lands, then the MR creation fails: the step is rolled back, mr_sha
    # unrecorded. The retry finds this content already on the branch, on the target's
    # head, and keeps it: one commit, not a second one of the same content.
    simulator.inject_fault("POST", MRS_ROUTE, status=502, times=2)
    result = process(sessions, registry, body(), backoff_initial_seconds=0.05)
    pushed = [r for r in simulator.log.records("POST", COMMITS_ROUTE) if r.status == 201]
    assert len(pushed) == 1
    (merge_request,) = simulator.merge_requests(PROJECT, state="opened")
    head = simulator.branch_head(PROJECT, "workqueue/sync-kernel")
    assert merge_request["sha"] == head == detail(sessions, result.item.id).mr_sha
    (commit,) = simulator.log_commits(PROJECT, "workqueue/sync-kernel", exclude="main")
    assert commit.message.endswith(f"Workqueue-Item: {result.item.id}\n")


def test_an_unrecorded_push_is_kept_when_the_target_moved_meanwhile(sessions, registry, simulator):
    failing = simulator.inject_fault("POST", MRS_ROUTE, status=502, times=None)
    config = fast_config(backoff_initial_seconds=0.05, backoff_max_seconds=0.1, max_attempts=100)
    with running_manager(sessions, registry, config, handled_types=["mr"]) as manager:
        result = submit(sessions, registry, body())
        manager.notify(result.item.id)
        wait_until(lambda: failing.hits >= 2, timeout=30, what="failed MR creations")
        first = simulator.branch_head(PROJECT, "workqueue/sync-kernel")
        simulator.push(PROJECT, "main", {"other.txt": "landed meanwhile\n"})
        simulator.faults.clear()
        wait_until(lambda: settled(sessions), timeout=30, what="the item to settle")
    # What the step would have opened its MR on, had it not failed: still this commit.
    (merge_request,) = simulator.merge_requests(PROJECT, state="opened")
    assert simulator.branch_head(PROJECT, "workqueue/sync-kernel") == first
    assert merge_request["sha"] == first == detail(sessions, result.item.id).mr_sha
    assert [r.status for r in simulator.log.records("POST", COMMITS_ROUTE)] == [201]


def test_new_content_over_an_unrecorded_push_gets_a_fresh_commit(sessions, registry, simulator):
    failing = simulator.inject_fault("POST", MRS_ROUTE, status=502, times=None)
    config = fast_config(backoff_initial_seconds=0.05, backoff_max_seconds=0.1, max_attempts=100)
    with running_manager(sessions, registry, config, handled_types=["mr"]) as manager:
        result = submit(sessions, registry, body())
        manager.notify(result.item.id)
        wait_until(lambda: failing.hits >= 2, timeout=30, what="failed MR creations")
        first = simulator.branch_head(PROJECT, "workqueue/sync-kernel")
        assert submit(sessions, registry, body(title="Sync v2")).outcome == "updated"
        simulator.faults.clear()
        manager.notify(result.item.id)
        wait_until(lambda: settled(sessions), timeout=30, what="the item to settle")
    (merge_request,) = simulator.merge_requests(PROJECT, state="opened")
    head = simulator.branch_head(PROJECT, "workqueue/sync-kernel")
    assert head != first
    assert merge_request["sha"] == head
    assert merge_request["title"] == "Sync v2"


def test_permanent_refusal_fails_with_gitlabs_message_and_retry_recovers(
    sessions, registry, simulator
):
    simulator.inject_fault(
        "POST",
        COMMITS_ROUTE,
        status=403,
        body={"message": "403 Forbidden - You are not allowed to push into this branch"},
    )
    with running_manager(sessions, registry, fast_config(), handled_types=["mr"]) as manager:
        result = submit(sessions, registry, body())
        manager.notify(result.item.id)
        wait_until(lambda: item_row(sessions, result.item.id).phase == Phase.FAILED, what="fail")
        failed = item_row(sessions, result.item.id)
        assert failed.attempts == 1
        assert "You are not allowed to push into this branch" in failed.error
        assert TOKEN not in failed.error
        assert simulator.merge_requests(PROJECT) == []

        # The operator fixed the permissions; a resubmission retries the failed item.
        retried = submit(sessions, registry, body())
        assert retried.outcome == "retried"
        manager.notify(retried.item.id)
        wait_until(lambda: settled(sessions), what="retry")
    row = item_row(sessions, result.item.id)
    assert (row.phase, row.attempts, row.error) == (Phase.ACTIVE, 0, None)
    assert len(simulator.merge_requests(PROJECT, state="opened")) == 1


def test_gitlab_refusing_an_action_is_a_permanent_failure(sessions, registry, simulator):
    result = process(
        sessions,
        registry,
        body(file_actions=[{"action": "create", "file_path": "README.md", "content": "x"}]),
    )
    row = item_row(sessions, result.item.id)
    assert row.phase == Phase.FAILED
    assert "A file with this name already exists" in row.error
    assert simulator.merge_requests(PROJECT) == []


def test_blocked_path_is_rejected_before_any_gitlab_call(sessions, registry, simulator):
    simulator.reset_requests()
    with pytest.raises(SubmissionRejectedError, match="blocklist"):
        submit(
            sessions,
            registry,
            body(
                file_actions=[{"action": "update", "file_path": ".gitlab-ci.yml", "content": "x"}]
            ),
        )
    assert simulator.request_count() == 0


def test_empty_diff_completes_without_leaving_an_mr_or_branch(sessions, registry, simulator):
    same_as_main = body(
        file_actions=[{"action": "update", "file_path": "kernel.spec", "content": "Version: 1\n"}]
    )
    result = process(sessions, registry, same_as_main)
    row, mr_row = item_row(sessions, result.item.id), detail(sessions, result.item.id)
    assert row.phase == Phase.COMPLETED
    assert mr_row.completion_reason == "empty_diff"
    assert simulator.merge_requests(PROJECT, state="opened") == []
    assert simulator.branch_head(PROJECT, "workqueue/sync-kernel") is None


def test_mr_that_became_empty_on_resubmission_is_closed_with_a_note(sessions, registry, simulator):
    first = process(sessions, registry, body())
    iid = detail(sessions, first.item.id).mr_iid
    # Upstream landed the same change on main; the caller resubmits what main has.
    simulator.push(PROJECT, "main", {"kernel.spec": "Version: 2\n", "patches/new.patch": "+fix\n"})
    now_upstream = [
        {"action": "update", "file_path": "kernel.spec", "content": "Version: 2\n"},
        {"action": "update", "file_path": "patches/new.patch", "content": "+fix\n"},
    ]
    process(sessions, registry, body(title="again", file_actions=now_upstream))
    assert item_row(sessions, first.item.id).phase == Phase.COMPLETED
    (closed,) = simulator.merge_requests(PROJECT)
    assert (closed["iid"], closed["state"]) == (iid, "closed")
    assert any("already contains" in note["body"] for note in simulator.notes(PROJECT, iid))
    assert simulator.branch_head(PROJECT, "workqueue/sync-kernel") is None
