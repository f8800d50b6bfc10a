"""`gitlab.hooks`: GitLab's own hook bodies (fixtures copied from shared/gitlab) read
into typed records, and the one rule for every malformed value."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from workqueue.gitlab.webhook_bodies import (
    MAX_ID,
    HookProject,
    JobHook,
    MergeRequestHook,
    MergeRequestRef,
    NoteHook,
    PipelineBuild,
    PipelineHook,
    PushCommit,
    PushHook,
    hook_project,
    job_hook,
    merge_request_hook,
    note_hook,
    pipeline_hook,
    push_hook,
)

FIXTURES = Path(__file__).parent / "fixtures"
SHA = "c3e5a7b9d1f3e5a7c9b1d3f5e7a9c1b3d5f7e9a1"
BEFORE = "8a2d4c6e0f1b3d5f7a9c1e3b5d7f9a1c3e5b7d9f"
PROJECT = HookProject(id=42, path="acme/widgets")
MESSAGE = "Bump requests to 2.32.3\n"


def fixture(kind: str) -> dict[str, Any]:
    body: dict[str, Any] = json.loads((FIXTURES / f"hook_{kind}.json").read_text())
    return body


def changed(body: dict[str, Any], **changes: Any) -> dict[str, Any]:
    """A deep copy of `body`; keys `a__b` set nested values."""
    body = copy.deepcopy(body)
    for path, value in changes.items():
        *parents, last = path.split("__")
        target = body
        for key in parents:
            target = target[key]
        target[last] = value
    return body


def test_merge_request_hook():
    assert merge_request_hook(fixture("merge_request")) == MergeRequestHook(
        project=PROJECT,
        iid=7,
        source_branch="bot/bump-requests",
        action="update",
        state="opened",
        oldrev=BEFORE,
        last_commit_id=SHA,
        last_commit_message=MESSAGE,
        updated_at=datetime(2025, 3, 1, 10, 5, 12, tzinfo=UTC),
        username="release-bot",
    )


def test_pipeline_hook_with_its_builds():
    hook = pipeline_hook(fixture("pipeline"))
    assert hook == PipelineHook(
        project=PROJECT,
        id=5511,
        sha=SHA,
        ref="bot/bump-requests",
        status="failed",
        created_at=datetime(2025, 3, 1, 10, 5, 14, tzinfo=UTC),
        finished_at=datetime(2025, 3, 1, 10, 9, 40, tzinfo=UTC),
        merge_request=MergeRequestRef(iid=7, source_branch="bot/bump-requests"),
        builds=(
            PipelineBuild("deploy-preview", "skipped", allow_failure=True),
            PipelineBuild("unit-tests", "failed", allow_failure=False),
            PipelineBuild("ruff", "success", allow_failure=False),
        ),
        variables=(),
    )


def test_job_hook():
    assert job_hook(fixture("job")) == JobHook(
        project=PROJECT,
        build_id=90312,
        name="unit-tests",
        status="failed",
        allow_failure=False,
        failure_reason="script_failure",
        pipeline_id=5511,
        sha=SHA,
    )


def test_note_hook():
    assert note_hook(fixture("note")) == NoteHook(
        project=PROJECT,
        noteable_type="MergeRequest",
        merge_request=MergeRequestRef(iid=7, source_branch="bot/bump-requests"),
    )


def test_push_hook():
    hook = push_hook(fixture("push"))
    assert hook == PushHook(
        project=PROJECT,
        ref="refs/heads/bot/bump-requests",
        before=BEFORE,
        after=SHA,
        checkout_sha=SHA,
        username="release-bot",
        commits=(PushCommit(SHA, MESSAGE),),
    )
    assert (hook.branch, hook.head, hook.commit(SHA)) == (
        "bot/bump-requests",
        SHA,
        PushCommit(SHA, MESSAGE),
    )


PARSERS = {
    "merge_request": merge_request_hook,
    "pipeline": pipeline_hook,
    "job": job_hook,
    "note": note_hook,
    "push": push_hook,
}


@pytest.mark.parametrize("kind", sorted(PARSERS))
def test_a_body_of_another_kind_is_not_that_hook(kind):
    body = changed(fixture(kind), object_kind="issue")
    assert PARSERS[kind](body) is None


@pytest.mark.parametrize("kind", sorted(PARSERS))
def test_a_body_without_object_kind_is_read_as_the_kind_the_receiver_decided(kind):
    body = fixture(kind)
    del body["object_kind"]
    assert PARSERS[kind](body) == PARSERS[kind](fixture(kind))


# One rule for ids: positive JSON integers that fit BIGINT. GitLab sends integers;
# nothing else is guessed at, so "123" is absent like any other malformed value.
@pytest.mark.parametrize(
    ("value", "read"),
    [
        (5511, 5511),
        (1, 1),
        (MAX_ID, MAX_ID),
        ("5511", None),
        (" 5511", None),
        (5511.0, None),
        (True, None),
        (0, None),
        (-5511, None),
        (MAX_ID + 1, None),
        (None, None),
        ([5511], None),
        ({"id": 5511}, None),
    ],
)
def test_ids_are_positive_json_integers(value, read):
    assert pipeline_hook(changed(fixture("pipeline"), object_attributes__id=value)).id == read
    assert job_hook(changed(fixture("job"), pipeline_id=value)).pipeline_id == read
    mr = merge_request_hook(changed(fixture("merge_request"), object_attributes__iid=value))
    assert mr.iid == read
    assert hook_project({"project": {"id": value}}).id == read


@pytest.mark.parametrize(
    ("value", "read"),
    [("bot/x", "bot/x"), ("", None), (7, None), (None, None), (["bot/x"], None), (True, None)],
)
def test_text_is_a_non_empty_json_string(value, read):
    assert pipeline_hook(changed(fixture("pipeline"), object_attributes__ref=value)).ref == read
    assert push_hook(changed(fixture("push"), user_username=value)).username == read


@pytest.mark.parametrize(
    ("value", "read"), [(True, True), (False, False), ("true", False), (1, False), (None, False)]
)
def test_flags_are_json_true_only(value, read):
    assert job_hook(changed(fixture("job"), build_allow_failure=value)).allow_failure is read
    body = changed(fixture("pipeline"))
    body["builds"][0]["allow_failure"] = value
    assert pipeline_hook(body).builds[0].allow_failure is read


MALFORMED_BODIES: list[dict[str, Any]] = [
    {},
    {"project": "acme/widgets", "object_attributes": "x", "builds": "x", "commits": {}},
    {"project": {"id": "42", "path_with_namespace": ""}, "object_attributes": []},
    {"project": {"id": True, "path_with_namespace": 42}, "merge_request": "x"},
    {"project": [], "user": "x", "builds": [1, None, "x"], "commits": [None, 3]},
]


@pytest.mark.parametrize("body", MALFORMED_BODIES)
@pytest.mark.parametrize("kind", sorted(PARSERS))
def test_malformed_bodies_make_records_that_concern_nothing(kind, body):
    hook = PARSERS[kind](body)
    assert hook is not None
    assert hook.project == HookProject(id=None, path=None)
    assert hook.project.names() == ()
    assert not hook.project.is_one_of("42", "acme/widgets", None)


def test_the_project_id_falls_back_to_the_top_level_project_id():
    body = fixture("job")
    del body["project"]
    assert job_hook(body).project == HookProject(id=42, path=None)


@pytest.mark.parametrize(
    ("names", "matches"),
    [
        (("acme/widgets",), True),  # the canonical path
        (("42",), True),  # the numeric id
        (("Acme/Widgets",), False),  # exact: no case folding
        (("acme/widgets/",), False),
        (("042",), False),
        ((None, "acme/widgets"), True),
        ((None,), False),
        ((), False),
    ],
)
def test_projects_are_compared_exactly(names, matches):
    assert PROJECT.is_one_of(*names) is matches


def test_pipeline_variables_and_merge_request_reference():
    body = changed(
        fixture("pipeline"),
        object_attributes__variables=[
            {"key": "WORKQUEUE_TRUNK_REQUEST", "value": "first"},
            {"key": "OTHER", "value": "x"},
            {"key": "WORKQUEUE_TRUNK_REQUEST", "value": "last"},
            {"key": 1, "value": "x"},
            "junk",
        ],
        merge_request=None,
    )
    hook = pipeline_hook(body)
    assert hook.variable("WORKQUEUE_TRUNK_REQUEST") == "last"
    assert hook.variable("MISSING") is None
    assert hook.merge_request is None  # a branch pipeline


@pytest.mark.parametrize(
    ("ref", "after", "checkout_sha", "branch", "head"),
    [
        ("refs/heads/main", SHA, SHA, "main", SHA),
        ("refs/heads/main", SHA, None, "main", SHA),
        ("refs/heads/main", "0" * 40, None, "main", None),  # deleted
        ("refs/tags/v1", SHA, SHA, None, SHA),
        ("refs/heads/", SHA, SHA, None, SHA),
        (None, None, None, None, None),
    ],
)
def test_push_branch_and_head(ref, after, checkout_sha, branch, head):
    hook = push_hook(changed(fixture("push"), ref=ref, after=after, checkout_sha=checkout_sha))
    assert (hook.branch, hook.head) == (branch, head)


def test_a_malformed_time_is_absent():
    body = changed(fixture("merge_request"), object_attributes__updated_at="yesterday")
    assert merge_request_hook(body).updated_at is None
