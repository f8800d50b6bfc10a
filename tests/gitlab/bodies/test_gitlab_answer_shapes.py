"""REST answers in the shapes real GitLab releases give (written for these tests after the
answers other projects captured from real instances), read by `gitlab.models`, and what
the MR type makes of the MR answers."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from workqueue.gitlab.models import (
    parse_job,
    parse_merge_request,
    parse_pipeline,
    parse_project,
)
from workqueue.types.mr.executors.merge_blockers import BlockerCode, merge_blocker
from workqueue.types.mr.models import MRWorkItem

SHA = "9d1e3f5a7c9b1d3f5e7a9c1b3d5f7e9a1c3e5b7d"
USER = {"id": 2, "username": "workqueue-bot", "name": "Workqueue Bot", "state": "active"}
PIPELINE = {
    "id": 601,
    "iid": 3,
    "project_id": 77,
    "sha": SHA,
    "ref": "refs/merge-requests/4/head",
    "status": "success",
    "source": "merge_request_event",
    "web_url": "https://gitlab.shapes.example/g/p/-/pipelines/601",
}

# GitLab 17.x: `detailed_merge_status`, `head_pipeline`, `merge_user`, `changes_count` a string.
MR_17: dict[str, Any] = {
    "id": 1400,
    "iid": 4,
    "project_id": 77,
    "title": "Sync sources",
    "description": "Automated",
    "state": "opened",
    "created_at": "2025-03-01T10:00:00.000Z",
    "updated_at": "2025-03-01T10:05:00.000Z",
    "merged_by": None,
    "merge_user": None,
    "merged_at": None,
    "closed_by": None,
    "closed_at": None,
    "target_branch": "main",
    "source_branch": "workqueue/x",
    "user_notes_count": 0,
    "author": USER,
    "assignees": [],
    "reviewers": [],
    "source_project_id": 77,
    "target_project_id": 77,
    "labels": ["bot"],
    "draft": False,
    "work_in_progress": False,
    "merge_when_pipeline_succeeds": False,
    "merge_status": "can_be_merged",
    "detailed_merge_status": "mergeable",
    "sha": SHA,
    "merge_commit_sha": None,
    "squash_commit_sha": None,
    "has_conflicts": False,
    "blocking_discussions_resolved": True,
    "web_url": "https://gitlab.shapes.example/g/p/-/merge_requests/4",
    "changes_count": "2",
    "head_pipeline": PIPELINE,
    "pipeline": {key: PIPELINE[key] for key in ("id", "sha", "ref", "status", "web_url")},
    "diff_refs": {"base_sha": "a" * 40, "head_sha": SHA, "start_sha": "a" * 40},
    "merge_error": None,
    "user": {"can_merge": True},
}


def answer(**changes: Any) -> dict[str, Any]:
    body = copy.deepcopy(MR_17)
    for key, value in changes.items():
        if value is ...:
            body.pop(key, None)
        else:
            body[key] = value
    return body


# Before 15.6: no `detailed_merge_status`.
MR_15 = answer(detailed_merge_status=...)
# Before 14: `work_in_progress` and no `draft`.
MR_13 = answer(detailed_merge_status=..., draft=..., work_in_progress=True)
# Right after creation: the diff and the pipeline are not there yet.
MR_CREATED = answer(
    changes_count=None, diff_refs=None, head_pipeline=None, pipeline=None, merge_status="checking"
)
# A list entry (`MergeRequestBasic`): no head_pipeline, diff_refs, changes_count, user.
MR_LISTED = answer(head_pipeline=..., pipeline=..., diff_refs=..., changes_count=..., user=...)
MR_MERGED = answer(
    state="merged",
    merged_by=USER,
    merge_user=USER,
    merged_at="2025-03-01T11:00:00.000Z",
    merge_commit_sha="b" * 40,
    detailed_merge_status="not_open",
)
MR_CLOSED = answer(state="closed", closed_by=USER, closed_at="2025-03-01T11:00:00.000Z")


def test_a_current_answer():
    read = parse_merge_request(MR_17)
    assert (read.detailed_merge_status, read.merge_status) == ("mergeable", "can_be_merged")
    assert (read.head_pipeline_id, read.head_pipeline_sha) == (601, SHA)
    assert (read.has_conflicts, read.blocking_discussions_resolved) == (False, True)


@pytest.mark.parametrize(
    ("body", "state", "draft", "detailed", "pipeline"),
    [
        (MR_15, "opened", False, None, 601),
        (MR_13, "opened", True, None, 601),
        (MR_CREATED, "opened", False, "mergeable", None),
        (MR_LISTED, "opened", False, "mergeable", None),
        (MR_MERGED, "merged", False, "not_open", 601),
        (MR_CLOSED, "closed", False, "mergeable", 601),
    ],
    ids=["15.x", "13.x", "just created", "listed", "merged", "closed"],
)
def test_each_answer_shape_is_read(body, state, draft, detailed, pipeline):
    read = parse_merge_request(body)
    assert (read.state, read.draft, read.detailed_merge_status) == (state, draft, detailed)
    assert read.head_pipeline_id == pipeline


def item() -> MRWorkItem:
    return MRWorkItem(auto_merge=True, target_branch="main", mr_sha=SHA)


@pytest.mark.parametrize(
    ("body", "code"),
    [
        (MR_17, None),
        (MR_15, None),  # merged from merge_status, its pipeline green on the head
        (MR_13, BlockerCode.DRAFT),
        (answer(detailed_merge_status=..., merge_status="unchecked"), BlockerCode.GITLAB_CHECKING),
        (
            answer(detailed_merge_status=..., merge_status="cannot_be_merged", has_conflicts=True),
            BlockerCode.CONFLICT,
        ),
        (
            answer(detailed_merge_status=..., blocking_discussions_resolved=False),
            BlockerCode.DISCUSSIONS_NOT_RESOLVED,
        ),
        (answer(detailed_merge_status=..., merge_status=...), BlockerCode.OTHER),
    ],
    ids=["17.x", "15.x", "13.x draft", "unchecked", "conflict", "discussions", "no status"],
)
def test_what_the_mr_type_makes_of_each_answer(body, code):
    blocker = merge_blocker(item(), parse_merge_request(body))
    assert (blocker.code if blocker else None) == code


@pytest.mark.parametrize("ci_config_path", [None, "", ".ci/main.yml"])
def test_project_answers(ci_config_path):
    read = parse_project(
        {
            "id": 77,
            "path_with_namespace": "g/p",
            "default_branch": "main",
            "web_url": "https://gitlab.shapes.example/g/p",
            "ci_config_path": ci_config_path,
            "merge_method": "ff",
            "merge_trains_enabled": False,
        }
    )
    assert (read.id, read.path_with_namespace, read.ci_config_path) == (77, "g/p", ci_config_path)


@pytest.mark.parametrize(
    ("status", "reason"), [("failed", "runner_system_failure"), ("success", None)]
)
def test_job_answers_carry_a_failure_reason_only_when_failed(status, reason):
    body: dict[str, Any] = {
        "id": 90,
        "name": "unit",
        "stage": "test",
        "status": status,
        "ref": "workqueue/x",
        "allow_failure": False,
        "pipeline": {"id": 601, "project_id": 77, "sha": SHA, "ref": "workqueue/x"},
        "commit": {"id": SHA},
        "web_url": "https://gitlab.shapes.example/g/p/-/jobs/90",
    }
    if reason is not None:
        body["failure_reason"] = reason
    read = parse_job(body)
    assert (read.status, read.failure_reason, read.pipeline_id, read.sha) == (
        status,
        reason,
        601,
        SHA,
    )


def test_pipeline_answers():
    read = parse_pipeline({**PIPELINE, "detailed_status": {"text": "passed"}, "name": None})
    assert (read.id, read.sha, read.status, read.source) == (
        601,
        SHA,
        "success",
        PIPELINE["source"],
    )
