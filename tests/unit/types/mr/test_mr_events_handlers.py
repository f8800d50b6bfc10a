"""The `mr` event handlers on GitLab hook bodies: pure functions, no database.

The bodies are trimmed copies of GitLab's own payloads (the fixtures in
shared/gitlab/hook_*.json: project 42 `acme/widgets`, MR !7, pipeline 5511,
job 90312, head 8a2d… → c3e5…), with their mixed timestamp styles.
"""

from __future__ import annotations

import copy
import uuid
from datetime import UTC, datetime
from typing import Any

import pytest
import sqlalchemy as sa

from workqueue.gitlab.webhook_bodies import ZERO_SHA
from workqueue.queue.contract import EventContext, EventResult
from workqueue.queue.dimensions import Dimensions, DimensionUpdate
from workqueue.queue.models import DimensionStatus, Phase
from workqueue.queue.registry import TypeRegistry
from workqueue.types.mr.authorship import stamp
from workqueue.types.mr.decider import decide_mr
from workqueue.types.mr.events import (
    on_job,
    on_merge_request,
    on_note,
    on_pipeline,
    on_push,
    register_mr_event_handlers,
)
from workqueue.types.mr.models import MRWorkItem

OLD = "8a2d4c6e0f1b3d5f7a9c1e3b5d7f9a1c3e5b7d9f"
NEW = "c3e5a7b9d1f3e5a7c9b1d3f5e7a9c1b3d5f7e9a1"
OTHER = "f" * 40
ITEM_ID = uuid.UUID("0b5f6a4e-7c1d-4e2a-9f3b-8d6c5a4b3e21")
OTHER_ITEM = uuid.UUID("9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d")
BOT, HUMAN = {"id": 7, "username": "release-bot"}, {"id": 3, "username": "ada"}
PROJECT = {"id": 42, "path_with_namespace": "acme/widgets", "default_branch": "main"}
RECONCILE = DimensionUpdate("needs_reconcile", DimensionStatus.TRUE)
EMPTY_CHECK = DimensionUpdate("needs_empty_check", DimensionStatus.TRUE)
NOW = datetime(2025, 3, 1, 11, tzinfo=UTC)


def retry(job: str) -> DimensionUpdate:
    return DimensionUpdate("needs_ci_retry", DimensionStatus.TRUE, variant=job)


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


MR_HOOK: dict[str, Any] = {
    "object_kind": "merge_request",
    "event_type": "merge_request",
    "user": BOT,
    "project": PROJECT,
    "object_attributes": {
        "id": 1001,
        "iid": 7,
        "source_branch": "workqueue/bump-requests",
        "target_branch": "main",
        "author_id": 7,
        "state": "opened",
        "draft": False,
        "detailed_merge_status": "checking",
        "head_pipeline_id": 5511,
        "updated_at": "2025-03-01T10:05:12Z",
        "last_commit": {
            "id": NEW,
            "message": "Bump requests to 2.32.3\n",
            "timestamp": "2025-03-01T10:05:00+00:00",
        },
        "action": "update",
        "oldrev": OLD,
    },
    "changes": {"updated_at": {"previous": "2025-03-01 10:00:04 UTC", "current": "..."}},
}

PIPELINE_HOOK: dict[str, Any] = {
    "object_kind": "pipeline",
    "object_attributes": {
        "id": 5511,
        "ref": "workqueue/bump-requests",
        "sha": NEW,
        "before_sha": OLD,
        "source": "merge_request_event",
        "status": "failed",
        "created_at": "2025-03-01 10:05:14 UTC",
        "finished_at": "2025-03-01 10:09:40 UTC",
    },
    "merge_request": {"id": 1001, "iid": 7, "source_branch": "workqueue/bump-requests"},
    "project": PROJECT,
    "builds": [
        {"id": 90313, "name": "deploy-preview", "status": "skipped", "allow_failure": True},
        {
            "id": 90312,
            "name": "unit-tests",
            "status": "failed",
            "failure_reason": "script_failure",
            "allow_failure": False,
        },
        {"id": 90311, "name": "ruff", "status": "success", "allow_failure": False},
    ],
}

JOB_HOOK: dict[str, Any] = {
    "object_kind": "build",
    "ref": "refs/merge-requests/7/head",
    "sha": NEW,
    "build_id": 90312,
    "build_name": "unit-tests",
    "build_stage": "test",
    "build_status": "failed",
    "build_finished_at": "2025-03-01 10:09:40 UTC",
    "build_allow_failure": False,
    "build_failure_reason": "script_failure",
    "pipeline_id": 5511,
    "project_id": 42,
    "project": PROJECT,
}

NOTE_HOOK: dict[str, Any] = {
    "object_kind": "note",
    "user": HUMAN,
    "project_id": 42,
    "project": PROJECT,
    "object_attributes": {"id": 77001, "note": "@release-bot retry please"},
    "merge_request": {"iid": 7, "state": "opened", "detailed_merge_status": "ci_must_pass"},
}

PUSH_HOOK: dict[str, Any] = {
    "object_kind": "push",
    "before": OLD,
    "after": NEW,
    "ref": "refs/heads/workqueue/bump-requests",
    "checkout_sha": NEW,
    "user_username": "ada",
    "project_id": 42,
    "project": PROJECT,
    "commits": [
        {"id": NEW, "message": "Fix the tests\n", "timestamp": "2025-03-01T12:05:00+02:00"}
    ],
}


def hook(base: dict[str, Any], **changes: Any) -> dict[str, Any]:
    """A deep copy of `base`; keys `a__b` set nested values (`None` deletes)."""
    body = copy.deepcopy(base)
    for path, value in changes.items():
        *parents, last = path.split("__")
        target = body
        for key in parents:
            target = target[key]
        if value is None:
            target.pop(last, None)
        else:
            target[last] = value
    return body


def item(**fields: Any) -> MRWorkItem:
    values: dict[str, Any] = {
        "id": ITEM_ID,
        "item_type": "mr",
        "phase": Phase.ACTIVE,
        "project": "acme/widgets",
        "project_path": "acme/widgets",  # canonical, resolved at submission
        "source_branch": "workqueue/bump-requests",
        "target_branch": "main",
        "title": "Bump requests",
        "commit_message": "Sync dependencies",
        "file_actions": [],
        "content_hash": "sha256:x",
        "mr_iid": 7,
        "mr_sha": NEW,
        "head_pipeline_id": 5511,
        "head_pipeline_sha": NEW,
    }
    values.update(fields)
    return MRWorkItem(**values)


def run(handler, body: dict[str, Any], mr_item: MRWorkItem | None = None) -> EventResult | None:
    mr_item = mr_item or item()
    context = EventContext(
        session=None,  # type: ignore[arg-type]  # handlers never touch it
        item=mr_item,
        dimensions=Dimensions([], NOW),
        event_type=str(body.get("object_kind")),
        body=body,
        received_at=NOW,
    )
    return handler(context)


def reconcile_only(result: EventResult | None) -> bool:
    return (
        result is not None
        and result.phase is None
        and result.event_ts is None
        and not result.detail_updates
        and result.dimensions == (RECONCILE,)
    )


# -- merge request hooks ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("action", "state", "user"),
    [
        ("merge", "merged", HUMAN),
        ("update", "merged", HUMAN),  # a state without the action still counts
        ("merge", "opened", HUMAN),  # and an action without the state
        ("close", "closed", HUMAN),
        ("close", "closed", BOT),  # the service's own close (an empty diff)
        ("update", "closed", HUMAN),
    ],
)
def test_merge_and_close_hooks_only_ask_gitlab(action, state, user):
    # The hook may be forged or replayed: reconcile_mr reads the MR and decides.
    body = hook(
        MR_HOOK,
        object_attributes__action=action,
        object_attributes__state=state,
        object_attributes__oldrev=None,
        user=user,
    )
    result = run(on_merge_request, body)
    assert reconcile_only(result)
    assert result is not None
    assert user["username"] in (result.reason or "")
    assert "confirming with GitLab" in (result.reason or "")


def test_a_merged_hook_carrying_commits_is_not_taken_for_a_foreign_push():
    body = hook(MR_HOOK, object_attributes__action="merge", object_attributes__state="merged")
    assert reconcile_only(run(on_merge_request, body, item(mr_sha=OLD)))


@pytest.mark.parametrize(
    "action", ["approved", "unapproved", "approval", "unapproval", "reopen", "open", "update"]
)
def test_other_mr_actions_ask_for_a_reconcile(action):
    body = hook(MR_HOOK, object_attributes__action=action, object_attributes__oldrev=None)
    assert reconcile_only(run(on_merge_request, body))


@pytest.mark.parametrize(
    ("fields", "foreign"),
    [
        # Our own push (mr_sha is the new head): nothing foreign.
        ({"mr_sha": NEW}, False),
        # A push on top of our head, by someone else (another commit message).
        ({"mr_sha": OLD}, True),
        # On top of the foreign head already recorded: still foreign, the newest head wins.
        ({"mr_sha": OTHER, "foreign_head_sha": OLD}, True),
        # Our own commit (stamped for this item) whose step was rolled back after the push.
        ({"mr_sha": OLD, "last_commit": stamp("Bump requests to 2.32.3", ITEM_ID)}, False),
        # The same message without the trailer: someone else's commit (e.g. a copy).
        ({"mr_sha": OLD, "commit_message": "Bump requests to 2.32.3"}, True),
        # Stamped for another item (copied from another branch): not ours.
        ({"mr_sha": OLD, "last_commit": stamp("Bump requests to 2.32.3", OTHER_ITEM)}, True),
        # The trailer is not the last line: a person wrote below it.
        (
            {"mr_sha": OLD, "last_commit": stamp("Bump", ITEM_ID) + "\nFixed by hand\n"},
            True,
        ),
        # A late hook of an older push: it did not start from a head we know.
        ({"mr_sha": OTHER}, False),
        # Before the service pushed anything the branch is not ours yet.
        ({"mr_sha": None}, False),
    ],
)
def test_update_with_new_commits_records_a_foreign_head(fields, foreign):
    message = fields.pop("last_commit", None)
    body = (
        MR_HOOK
        if message is None
        else hook(MR_HOOK, object_attributes__last_commit__message=message)
    )
    result = run(on_merge_request, body, item(**fields))
    if not foreign:
        assert reconcile_only(result)
        return
    assert result is not None
    assert result.phase is None
    assert result.detail_updates == {"foreign_head_sha": NEW}
    assert result.event_ts == at("2025-03-01T10:05:12")
    assert result.dimensions == (RECONCILE,)


@pytest.mark.parametrize(
    ("body", "fields"),
    [
        (hook(MR_HOOK, object_attributes__iid=8), {}),  # another MR of the branch
        (hook(MR_HOOK, project={"id": 43, "path_with_namespace": "acme/other"}), {}),
        (MR_HOOK, {"mr_iid": None}),  # no MR opened yet
        (hook(MR_HOOK, object_kind="issue"), {}),
    ],
)
def test_mr_hooks_about_something_else_are_irrelevant(body, fields):
    assert run(on_merge_request, body, item(**fields)) is None


@pytest.mark.parametrize(
    ("project", "project_path", "relevant"),
    [
        # The canonical path the submission resolved decides, whatever the caller wrote.
        ("ACME/Widgets", "acme/widgets", True),
        ("42", "acme/widgets", True),
        ("42", "42", True),  # no GitLab lookup configured: the id as given
        ("43", "43", False),
        ("acme/other", "acme/other", False),
        # Compared exactly, as the resolvers do: no case folding.
        ("ACME/Widgets", "ACME/Widgets", False),
        ("acme/widgets", None, False),
    ],
)
def test_projects_match_the_canonical_path_exactly(project, project_path, relevant):
    result = run(
        on_merge_request,
        hook(MR_HOOK, object_attributes__oldrev=None),
        item(project=project, project_path=project_path),
    )
    assert (result is not None) == relevant


def test_a_string_id_is_not_an_id():
    body = hook(MR_HOOK, object_attributes__oldrev=None, object_attributes__iid="7")
    assert run(on_merge_request, body) is None


# -- pipeline hooks ----------------------------------------------------------------------


def test_pipeline_of_the_head_records_it_and_flags_failed_jobs():
    result = run(on_pipeline, PIPELINE_HOOK, item(head_pipeline_id=None, head_pipeline_sha=None))
    assert result is not None
    assert result.phase is None
    assert result.detail_updates == {
        "head_pipeline_id": 5511,
        "head_pipeline_sha": NEW,
        "head_pipeline_status": "failed",
    }
    assert result.event_ts == at("2025-03-01T10:09:40")
    # allow_failure jobs block nothing; skipped and successful jobs need no retry.
    assert result.dimensions == (RECONCILE, retry("unit-tests"))


def test_running_pipeline_is_dated_by_its_creation():
    body = hook(
        PIPELINE_HOOK,
        object_attributes__status="running",
        object_attributes__finished_at=None,
        builds=[],
    )
    result = run(on_pipeline, body)
    assert result is not None
    assert result.event_ts == at("2025-03-01T10:05:14")
    assert result.detail_updates["head_pipeline_status"] == "running"
    assert result.dimensions == (RECONCILE,)


@pytest.mark.parametrize(
    ("body", "fields"),
    [
        (PIPELINE_HOOK, {"mr_sha": None}),
        (hook(PIPELINE_HOOK, merge_request__iid=8), {}),  # another MR's pipeline
        (PIPELINE_HOOK, {"head_pipeline_id": 5600}),  # superseded for the same sha
        (hook(PIPELINE_HOOK, merge_request=None, object_attributes__ref="main"), {}),
        (hook(PIPELINE_HOOK, project={"id": 9, "path_with_namespace": "x/y"}), {}),
    ],
)
def test_pipelines_that_say_nothing_about_the_head_are_irrelevant(body, fields):
    assert run(on_pipeline, body, item(**fields)) is None


@pytest.mark.parametrize("status", ["success", "failed"])
def test_a_pipeline_of_the_mr_on_another_sha_only_makes_reconcile_look(status):
    # An older head's pipeline, or a merged-results one (sha = a temporary merge commit):
    # whether it tests the head is GitLab's to say, so nothing of the hook is recorded.
    body = hook(PIPELINE_HOOK, object_attributes__status=status)
    result = run(on_pipeline, body, item(mr_sha=OLD))
    assert result is not None
    assert result.dimensions == (RECONCILE,)
    assert (result.detail_updates, result.event_ts) == ({}, None)


def test_a_branch_pipeline_on_another_sha_is_irrelevant():
    body = hook(PIPELINE_HOOK, merge_request=None, object_attributes__ref="workqueue/bump-requests")
    assert run(on_pipeline, body, item(mr_sha=OLD)) is None


def test_branch_pipeline_of_the_bot_branch_counts():
    body = hook(PIPELINE_HOOK, merge_request=None, object_attributes__source="push")
    result = run(on_pipeline, body)
    assert result is not None
    assert result.detail_updates["head_pipeline_id"] == 5511


def test_a_newer_pipeline_for_the_same_sha_replaces_the_recorded_one():
    result = run(on_pipeline, hook(PIPELINE_HOOK, object_attributes__id=5600))
    assert result is not None
    assert result.detail_updates["head_pipeline_id"] == 5600


# -- job hooks ------------------------------------------------------------------------


def test_failed_job_of_the_head_pipeline_asks_the_herder():
    result = run(on_job, JOB_HOOK)
    assert result is not None
    assert (result.phase, result.event_ts, dict(result.detail_updates)) == (None, None, {})
    assert result.dimensions == (retry("unit-tests"),)


def test_failed_job_of_a_pipeline_not_yet_recorded_also_reconciles_first():
    result = run(on_job, JOB_HOOK, item(head_pipeline_id=None))
    assert result is not None
    assert result.dimensions == (RECONCILE, retry("unit-tests"))


@pytest.mark.parametrize(
    ("body", "fields"),
    [
        (hook(JOB_HOOK, build_status="success", build_failure_reason="unknown_failure"), {}),
        (hook(JOB_HOOK, build_status="running"), {}),
        (hook(JOB_HOOK, build_allow_failure=True), {}),
        (JOB_HOOK, {"head_pipeline_id": 5600}),  # an older pipeline than the head one
        (JOB_HOOK, {"mr_sha": OLD}),
        (hook(JOB_HOOK, build_name=None), {}),
        (hook(JOB_HOOK, project_id=43, project={"id": 43, "path_with_namespace": "a/b"}), {}),
    ],
)
def test_jobs_that_need_no_retry_are_irrelevant(body, fields):
    assert run(on_job, body, item(**fields)) is None


# -- note and push hooks ----------------------------------------------------------------


def test_notes_are_irrelevant():
    assert run(on_note, NOTE_HOOK) is None


def test_push_to_the_target_branch_rechecks_the_diff_now():
    body = hook(PUSH_HOOK, ref="refs/heads/main", user_username="ada")
    result = run(on_push, body)
    assert result is not None
    assert result.dimensions == (EMPTY_CHECK,)
    assert result.dimensions[0].pending_until is None  # due at once
    assert (result.phase, result.event_ts, dict(result.detail_updates)) == (None, None, {})


@pytest.mark.parametrize(
    "message",
    [
        "Fix the tests\n",
        stamp("Fix the tests", OTHER_ITEM),
        stamp("Fix the tests", ITEM_ID) + "\nAmended by hand\n",
    ],
)
def test_push_by_someone_else_to_the_bot_branch_records_the_foreign_head(message):
    body = hook(PUSH_HOOK, commits=[{"id": NEW, "message": message}])
    # The item's own commit message is no longer enough to pass for the service.
    result = run(on_push, body, item(mr_sha=OLD, commit_message="Fix the tests"))
    assert result is not None
    assert result.detail_updates == {"foreign_head_sha": NEW}
    assert result.event_ts is None  # push hooks carry no event time
    assert result.dimensions == (RECONCILE,)
    assert "ada" in (result.reason or "")


@pytest.mark.parametrize(
    ("body", "fields"),
    [
        (PUSH_HOOK, {"mr_sha": NEW}),  # our own push
        (  # ours, stamped, whose step was rolled back
            hook(PUSH_HOOK, commits=[{"id": NEW, "message": stamp("Fix the tests", ITEM_ID)}]),
            {"mr_sha": OLD},
        ),
        (PUSH_HOOK, {"mr_sha": OTHER}),  # a late hook of an older push
        (hook(PUSH_HOOK, ref="refs/heads/feature"), {}),
        (hook(PUSH_HOOK, ref="refs/tags/v1"), {}),
        (hook(PUSH_HOOK, ref="refs/heads/main", after=ZERO_SHA, checkout_sha=None), {}),
        (hook(PUSH_HOOK, ref="refs/heads/main"), {"target_branch": None}),
        (hook(PUSH_HOOK, project={"id": 43, "path_with_namespace": "x/y"}, project_id=43), {}),
    ],
)
def test_pushes_that_need_nothing_are_irrelevant(body, fields):
    assert run(on_push, body, item(**fields)) is None


def test_deleting_the_bot_branch_asks_for_a_reconcile():
    body = hook(PUSH_HOOK, after=ZERO_SHA, checkout_sha=None, commits=[])
    assert reconcile_only(run(on_push, body))


# -- contract ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("handler", "body"),
    [
        (on_merge_request, MR_HOOK),
        (on_merge_request, hook(MR_HOOK, object_attributes__state="merged")),
        (on_pipeline, PIPELINE_HOOK),
        (on_job, JOB_HOOK),
        (on_push, PUSH_HOOK),
        (on_push, hook(PUSH_HOOK, ref="refs/heads/main")),
    ],
)
def test_handlers_leave_the_item_and_the_body_alone(handler, body):
    mr_item = item(mr_sha=OLD)
    before = {attr.key: getattr(mr_item, attr.key) for attr in sa.inspect(MRWorkItem).column_attrs}
    frozen = copy.deepcopy(body)
    run(handler, body, mr_item)
    run(handler, body, mr_item)
    after = {attr.key: getattr(mr_item, attr.key) for attr in sa.inspect(MRWorkItem).column_attrs}
    assert after == before
    assert body == frozen


def test_register_attaches_one_handler_per_event_type():
    registry = TypeRegistry()
    registration = registry.register("mr", model=MRWorkItem, decider=decide_mr)
    register_mr_event_handlers(registration)
    assert set(registration.event_handlers) == {
        "merge_request",
        "pipeline",
        "build",
        "note",
        "push",
        "check_signal",
    }
