"""Webhook bodies in every shape real GitLab releases send, written for these tests.

Each shape reproduces one captured by other projects from real GitLab
instances (the corpus in ../shared/gitlab/real_corpus, which is not part of
this repository): the keys and value types the service relies on, with our
own values. They share project 4242 `shapes/widgets`, MR !7 from
`workqueue/shape` (head `SHA`), head pipeline 9001 and job 77.

`SHAPES` lists them with the `X-Gitlab-Event` GitLab sends them under and
what they should reach: `ITEM` (the MR item of the tests) or nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

PROJECT_ID = 4242
PROJECT = "shapes/widgets"
BRANCH = "workqueue/shape"
IID = 7
SHA = "5e1f0c3a9b7d2e4f6a8c0b1d3e5f7a9c1b3d5e7f"
BEFORE = "0d2c4e6a8b1f3d5c7e9a0b2d4f6a8c1e3b5d7f90"
MAIN_HEAD = "7a9c1e3b5d7f90d2c4e6a8b1f3d5c7e9a0b2d4f6"
ZERO = "0" * 40
PIPELINE = 9001
JOB = 77
UTC = "2025-03-01 10:00:00 UTC"
UTC_LATER = "2025-03-01 10:05:00 UTC"
WEB = "https://gitlab.shapes.example"


@dataclass(frozen=True)
class Shape:
    name: str
    header: str  # X-Gitlab-Event
    body: dict[str, Any]
    reaches_item: bool  # does the resolver find the MR item for it?
    kind: str | None  # the event type the receiver takes it for (None: ignored)


def _user() -> dict[str, Any]:
    return {
        "id": 3,
        "name": "Ada Reviewer",
        "username": "ada",
        "avatar_url": None,
        "email": "[REDACTED]",
    }


def _project(*, with_id: bool = True) -> dict[str, Any]:
    """The hook's `project` (system hooks send it without `id`)."""
    body: dict[str, Any] = {
        "name": "widgets",
        "description": "",
        "web_url": f"{WEB}/{PROJECT}",
        "avatar_url": None,
        "git_ssh_url": f"git@gitlab.shapes.example:{PROJECT}.git",
        "git_http_url": f"{WEB}/{PROJECT}.git",
        "namespace": "shapes",
        "visibility_level": 0,
        "path_with_namespace": PROJECT,
        "default_branch": "main",
        "ci_config_path": None,
        "homepage": f"{WEB}/{PROJECT}",
        "url": f"git@gitlab.shapes.example:{PROJECT}.git",
        "ssh_url": f"git@gitlab.shapes.example:{PROJECT}.git",
        "http_url": f"{WEB}/{PROJECT}.git",
    }
    if with_id:
        body = {"id": PROJECT_ID, **body}
    return body


def _repository() -> dict[str, Any]:
    return {
        "name": "widgets",
        "url": f"git@gitlab.shapes.example:{PROJECT}.git",
        "description": "",
        "homepage": f"{WEB}/{PROJECT}",
        "git_http_url": f"{WEB}/{PROJECT}.git",
        "git_ssh_url": f"git@gitlab.shapes.example:{PROJECT}.git",
        "visibility_level": 0,
    }


def _commit(sha: str = SHA, stamp: str = "2025-03-01T11:59:00+02:00") -> dict[str, Any]:
    return {
        "id": sha,
        "message": "Sync sources\n\nWorkqueue-Item: 00000000-0000-0000-0000-000000000000\n",
        "title": "Sync sources",
        "timestamp": stamp,
        "url": f"{WEB}/{PROJECT}/-/commit/{sha}",
        "author": {"name": "Workqueue Bot", "email": "bot@shapes.example"},
    }


def _label() -> dict[str, Any]:
    return {
        "id": 31,
        "title": "bot",
        "color": "#6699cc",
        "project_id": PROJECT_ID,
        "created_at": UTC,
        "updated_at": UTC,
        "template": False,
        "description": None,
        "type": "ProjectLabel",
        "group_id": None,
    }


def _side() -> dict[str, Any]:
    return {
        "name": "widgets",
        "web_url": f"{WEB}/{PROJECT}",
        "namespace": "shapes",
        "path_with_namespace": PROJECT,
        "default_branch": "main",
        "git_http_url": f"{WEB}/{PROJECT}.git",
    }


def mr_attributes(*, detailed: bool = True, **changes: Any) -> dict[str, Any]:
    attributes: dict[str, Any] = {
        "id": 1207,
        "iid": IID,
        "title": "Sync sources",
        "description": "Automated",
        "source_branch": BRANCH,
        "target_branch": "main",
        "source_project_id": PROJECT_ID,
        "target_project_id": PROJECT_ID,
        "author_id": 2,
        "assignee_id": None,
        "assignee_ids": [],
        "reviewer_ids": [],
        "state_id": 1,
        "state": "opened",
        "draft": False,
        "work_in_progress": False,
        "blocking_discussions_resolved": True,
        "first_contribution": False,
        "merge_status": "can_be_merged",
        "head_pipeline_id": PIPELINE,
        "merge_commit_sha": None,
        "merge_error": None,
        "merge_params": {"force_remove_source_branch": "1"},
        "merge_user_id": None,
        "merge_when_pipeline_succeeds": False,
        "created_at": UTC,
        "updated_at": UTC_LATER,
        "last_edited_at": None,
        "prepared_at": UTC,
        "url": f"{WEB}/{PROJECT}/-/merge_requests/{IID}",
        "source": _side(),
        "target": _side(),
        "last_commit": _commit(),
        "labels": [_label()],
        "action": "update",
    }
    if detailed:
        attributes["detailed_merge_status"] = "mergeable"
    attributes.update(changes)
    return attributes


def merge_request_hook(*, detailed: bool = True, **changes: Any) -> dict[str, Any]:
    """GitLab 16/17 (`detailed`) or before 15.6: with `project`, `changes`, UTC times."""
    return {
        "object_kind": "merge_request",
        "event_type": "merge_request",
        "user": _user(),
        "project": _project(),
        "object_attributes": mr_attributes(detailed=detailed, **changes),
        "labels": [_label()],
        "changes": {"updated_at": {"previous": UTC, "current": UTC_LATER}},
        "repository": _repository(),
    }


def merge_request_hook_8x() -> dict[str, Any]:
    """GitLab 8.x: no top-level `project` (only `object_attributes.target`), ISO times with
    milliseconds, no `event_type`."""
    attributes = mr_attributes(detailed=False, action="open")
    for key in ("created_at", "updated_at"):
        attributes[key] = "2016-03-01T10:00:00.000Z"
    for key in ("draft", "blocking_discussions_resolved", "labels", "prepared_at", "state_id"):
        del attributes[key]
    attributes["target"] = {
        "name": "widgets",
        "ssh_url": f"git@gitlab.shapes.example:{PROJECT}.git",
        "http_url": f"{WEB}/{PROJECT}.git",
        "web_url": f"{WEB}/{PROJECT}",
        "namespace": "shapes",
        "visibility_level": 0,
    }
    return {
        "object_kind": "merge_request",
        "user": {"name": "Ada", "username": "ada", "avatar_url": None},
        "object_attributes": attributes,
    }


def system_merge_request_hook() -> dict[str, Any]:
    """A System Hook's MR event: `event_name`, and a `project` without `id`."""
    body = merge_request_hook(detailed=False)
    body["event_name"] = "merge_request"
    body["project"] = _project(with_id=False)
    del body["changes"]
    return body


def external_status_check_hook() -> dict[str, Any]:
    body = merge_request_hook(detailed=False, action="approved")
    body["external_approval_rule"] = {"id": 5, "name": "compliance", "external_url": WEB}
    body["changes"] = {"merge_status": {"previous": "unchecked", "current": "can_be_merged"}}
    return body


def _build(name: str, status: str, reason: str | None = None) -> dict[str, Any]:
    return {
        "id": JOB if name == "unit" else JOB + 1,
        "stage": "test",
        "name": name,
        "status": status,
        "created_at": UTC,
        "started_at": UTC,
        "finished_at": UTC_LATER,
        "duration": 300.0,
        "queued_duration": 1.5,
        "failure_reason": reason,
        "when": "on_success",
        "manual": False,
        "allow_failure": False,
        "user": _user(),
        "runner": {"id": 12, "description": "runner", "active": True, "is_shared": True},
        "artifacts_file": {"filename": None, "size": None},
        "environment": None,
    }


def pipeline_hook(
    *,
    merge_request: bool = True,
    detailed: bool = True,
    sha: str = SHA,
    pipeline: int = PIPELINE,
    **attributes: Any,
) -> dict[str, Any]:
    mr = None
    if merge_request:
        mr = {
            "id": 1207,
            "iid": IID,
            "title": "Sync sources",
            "source_branch": BRANCH,
            "source_project_id": PROJECT_ID,
            "target_branch": "main",
            "target_project_id": PROJECT_ID,
            "state": "opened",
            "merge_status": "can_be_merged",
            "url": f"{WEB}/{PROJECT}/-/merge_requests/{IID}",
        }
        if detailed:
            mr["detailed_merge_status"] = "mergeable"
    object_attributes = {
        "id": pipeline,
        "iid": 12,
        "name": None,
        "ref": BRANCH if merge_request else "main",
        "tag": False,
        "sha": sha,
        "before_sha": ZERO,
        "source": "merge_request_event" if merge_request else "push",
        "status": "failed",
        "detailed_status": "failed",
        "stages": ["test"],
        "created_at": UTC,
        "finished_at": UTC_LATER,
        "duration": 300,
        "queued_duration": None,
        "protected_ref": not merge_request,
        "variables": [{"key": "WORKQUEUE_TRUNK_REQUEST", "value": "not-a-uuid"}],
        "url": f"{WEB}/{PROJECT}/-/pipelines/{pipeline}",
        **attributes,
    }
    return {
        "object_kind": "pipeline",
        "object_attributes": object_attributes,
        "merge_request": mr,
        "user": _user(),
        "project": _project(),
        "commit": _commit(sha),
        "builds": [
            _build("unit", "failed", "runner_system_failure"),
            _build("lint", "success"),
        ],
    }


def child_pipeline_hook() -> dict[str, Any]:
    """A child pipeline: `source_pipeline` names its parent (and another pipeline id)."""
    body = pipeline_hook(merge_request=False, pipeline=PIPELINE + 5, source="parent_pipeline")
    body["object_attributes"]["ref"] = BRANCH
    body["source_pipeline"] = {
        "project": {
            "id": PROJECT_ID,
            "web_url": f"{WEB}/{PROJECT}",
            "path_with_namespace": PROJECT,
        },
        "pipeline_id": PIPELINE,
        "job_id": JOB + 9,
    }
    return body


def job_hook(*, with_project: bool = True, status: str = "failed") -> dict[str, Any]:
    """A Job Hook: 16.0 and later with `project` and `*_iso` times; before, only
    `project_id` and the display name `project_name`."""
    body: dict[str, Any] = {
        "object_kind": "build",
        "ref": f"refs/merge-requests/{IID}/head",
        "tag": False,
        "before_sha": ZERO,
        "sha": SHA,
        "retries_count": 0,
        "build_id": JOB,
        "build_name": "unit",
        "build_stage": "test",
        "build_status": status,
        "build_created_at": UTC,
        "build_started_at": UTC if status != "created" else None,
        "build_finished_at": UTC_LATER if status == "failed" else None,
        "build_duration": 300.0 if status == "failed" else None,
        "build_queued_duration": 1.0,
        "build_allow_failure": False,
        # Not failed jobs say "unknown_failure" (or, captured once, a stale reason).
        "build_failure_reason": "runner_system_failure" if status == "failed" else "script_failure",
        "pipeline_id": PIPELINE,
        "project_id": PROJECT_ID,
        "project_name": "Shapes / widgets",
        "user": _user(),
        "commit": {
            "id": PIPELINE,  # GitLab puts the pipeline id here
            "name": None,
            "sha": SHA,
            "message": "Sync sources\n",
            "author_name": "Workqueue Bot",
            "author_email": "bot@shapes.example",
            "author_url": f"{WEB}/workqueue-bot",
            "status": "running",
            "duration": None,
            "started_at": UTC,
            "finished_at": None,
        },
        "repository": _repository(),
        "runner": {"id": 12, "description": "runner", "active": True, "is_shared": True},
        "environment": None,
    }
    if with_project:
        body["project"] = _project()
        body["build_created_at_iso"] = "2025-03-01T10:00:00Z"
        body["build_started_at_iso"] = "2025-03-01T10:00:00Z"
        body["build_finished_at_iso"] = None
    return body


def invented_job_event() -> dict[str, Any]:
    """A client library's own invention (`object_kind: job`, `job_*` keys): no GitLab kind."""
    return {
        "object_kind": "job",
        "ref": BRANCH,
        "sha": SHA,
        "job_id": JOB,
        "job_name": "unit",
        "job_status": "failed",
        "project_id": PROJECT_ID,
        "project_name": "shapes/widgets",
    }


def note_hook(noteable_type: str = "MergeRequest", *, internal: bool = False) -> dict[str, Any]:
    body: dict[str, Any] = {
        "object_kind": "note",
        "event_type": "confidential_note" if internal else "note",
        "user": _user(),
        "project_id": PROJECT_ID,
        "project": _project(),
        "repository": _repository(),
        "object_attributes": {
            "id": 88,
            "note": "Looks good",
            "noteable_type": noteable_type,
            "author_id": 3,
            "created_at": UTC,
            "updated_at": UTC,
            "project_id": PROJECT_ID,
            "attachment": None,
            "line_code": None,
            "commit_id": SHA if noteable_type == "Commit" else "",
            "noteable_id": 1207,
            "system": False,
            "internal": internal,
            "st_diff": None,
            "action": "create",
            "url": f"{WEB}/{PROJECT}/-/merge_requests/{IID}#note_88",
        },
    }
    if noteable_type == "MergeRequest":
        body["merge_request"] = mr_attributes(detailed=False)
    elif noteable_type == "Commit":
        body["commit"] = _commit()
    elif noteable_type == "Issue":
        body["issue"] = {"id": 5, "iid": 3, "title": "Broken", "created_at": UTC, "state": "opened"}
    else:
        body["snippet"] = {"id": 9, "title": "x", "created_at": UTC, "updated_at": UTC}
    return body


def push_hook(branch: str = BRANCH, *, before: str = BEFORE, after: str = SHA) -> dict[str, Any]:
    deleted = after == ZERO
    return {
        "object_kind": "push",
        "event_name": "push",
        "before": before,
        "after": after,
        "ref": f"refs/heads/{branch}",
        "ref_protected": branch == "main",
        "checkout_sha": None if deleted else after,
        "message": None,
        "user_id": 3,
        "user_name": "Ada Reviewer",
        "user_username": "ada",
        "user_email": "",
        "user_avatar": None,
        "project_id": PROJECT_ID,
        "project": _project(),
        "commits": []
        if deleted
        else [{**_commit(after), "added": [], "modified": ["a"], "removed": []}],
        "total_commits_count": 0 if deleted else 1,
        "push_options": {},
        "repository": _repository(),
    }


def push_hook_without_repository_url() -> dict[str, Any]:
    body = push_hook()
    del body["repository"]["url"]
    del body["repository"]["homepage"]
    return body


def tag_push_hook() -> dict[str, Any]:
    body = push_hook()
    body.update({"object_kind": "tag_push", "event_name": "tag_push", "ref": "refs/tags/v1.0"})
    return body


def system_push_hook() -> dict[str, Any]:
    """A System Hook's push: `event_name` only, no `object_kind`."""
    body = push_hook()
    del body["object_kind"]
    return body


def repository_update_hook() -> dict[str, Any]:
    return {
        "event_name": "repository_update",
        "user_id": 1,
        "user_name": "Admin",
        "user_email": "admin@shapes.example",
        "user_avatar": None,
        "project_id": PROJECT_ID,
        "project": _project(),
        "changes": [{"before": BEFORE, "after": SHA, "ref": f"refs/heads/{BRANCH}"}],
        "refs": [f"refs/heads/{BRANCH}"],
    }


def _other_kind(kind: str, **extra: Any) -> dict[str, Any]:
    return {"object_kind": kind, "user": _user(), "project": _project(), **extra}


SHAPES: tuple[Shape, ...] = (
    Shape(
        "merge_request 17.x update",
        "Merge Request Hook",
        merge_request_hook(oldrev=BEFORE),
        reaches_item=True,
        kind="merge_request",
    ),
    Shape(
        "merge_request before 15.6 approved",
        "Merge Request Hook",
        merge_request_hook(detailed=False, action="approved"),
        reaches_item=True,
        kind="merge_request",
    ),
    Shape(
        "merge_request merged",
        "Merge Request Hook",
        merge_request_hook(action="merge", state="merged", merge_commit_sha=MAIN_HEAD),
        reaches_item=True,
        kind="merge_request",
    ),
    Shape(
        "merge_request approvals reset by a push (system)",
        "Merge Request Hook",
        merge_request_hook(action="update", system=True, system_action="approvals_reset"),
        reaches_item=True,
        kind="merge_request",
    ),
    Shape(
        "merge_request 8.x without project",
        "Merge Request Hook",
        merge_request_hook_8x(),
        reaches_item=False,
        kind="merge_request",
    ),
    Shape(
        "merge_request system hook",
        "System Hook",
        system_merge_request_hook(),
        reaches_item=True,
        kind="merge_request",
    ),
    Shape(
        "merge_request external status check",
        "Merge Request Hook",
        external_status_check_hook(),
        reaches_item=True,
        kind="merge_request",
    ),
    Shape(
        "pipeline of the MR", "Pipeline Hook", pipeline_hook(), reaches_item=True, kind="pipeline"
    ),
    Shape(
        "pipeline of the MR before 15.6",
        "Pipeline Hook",
        pipeline_hook(detailed=False),
        reaches_item=True,
        kind="pipeline",
    ),
    Shape(
        "pipeline of the target branch",
        "Pipeline Hook",
        pipeline_hook(merge_request=False, sha=MAIN_HEAD, pipeline=PIPELINE + 1),
        reaches_item=False,
        kind="pipeline",
    ),
    Shape(
        "child pipeline", "Pipeline Hook", child_pipeline_hook(), reaches_item=True, kind="pipeline"
    ),
    Shape("job 16.x with project", "Job Hook", job_hook(), reaches_item=True, kind="build"),
    Shape(
        "job 15.x without project",
        "Job Hook",
        job_hook(with_project=False),
        reaches_item=True,
        kind="build",
    ),
    Shape(
        "job created, stale failure reason",
        "Job Hook",
        job_hook(with_project=False, status="created"),
        reaches_item=True,
        kind="build",
    ),
    Shape(
        "job event of a client library",
        "Job Hook",
        invented_job_event(),
        reaches_item=False,
        kind=None,
    ),
    Shape("note on the MR", "Note Hook", note_hook(), reaches_item=True, kind="note"),
    Shape(
        "confidential note on the MR",
        "Confidential Note Hook",
        note_hook(internal=True),
        reaches_item=True,
        kind="note",
    ),
    Shape("note on a commit", "Note Hook", note_hook("Commit"), reaches_item=False, kind="note"),
    Shape("note on an issue", "Note Hook", note_hook("Issue"), reaches_item=False, kind="note"),
    Shape("note on a snippet", "Note Hook", note_hook("Snippet"), reaches_item=False, kind="note"),
    Shape("push to the bot branch", "Push Hook", push_hook(), reaches_item=True, kind="push"),
    Shape("branch created", "Push Hook", push_hook(before=ZERO), reaches_item=True, kind="push"),
    Shape(
        "branch deleted",
        "Push Hook",
        push_hook(before=SHA, after=ZERO),
        reaches_item=True,
        kind="push",
    ),
    Shape(
        "push to the target branch",
        "Push Hook",
        push_hook("main", after=MAIN_HEAD),
        reaches_item=True,
        kind="push",
    ),
    Shape(
        "push without repository url",
        "Push Hook",
        push_hook_without_repository_url(),
        reaches_item=True,
        kind="push",
    ),
    Shape("tag push", "Tag Push Hook", tag_push_hook(), reaches_item=False, kind="tag_push"),
    Shape("system push", "System Hook", system_push_hook(), reaches_item=False, kind=None),
    Shape(
        "system repository update",
        "System Hook",
        repository_update_hook(),
        reaches_item=False,
        kind=None,
    ),
    Shape(
        "issue",
        "Issue Hook",
        _other_kind("issue", object_attributes={"iid": 3}),
        reaches_item=False,
        kind="issue",
    ),
    Shape(
        "deployment",
        "Deployment Hook",
        _other_kind("deployment", status="success", status_changed_at="2025-03-01 11:00:00 +0200"),
        reaches_item=False,
        kind="deployment",
    ),
    Shape(
        "release",
        "Release Hook",
        _other_kind("release", tag="v1.0"),
        reaches_item=False,
        kind="release",
    ),
    Shape(
        "wiki page",
        "Wiki Page Hook",
        _other_kind("wiki_page"),
        reaches_item=False,
        kind="wiki_page",
    ),
    Shape(
        "feature flag",
        "Feature Flag Hook",
        _other_kind("feature_flag"),
        reaches_item=False,
        kind="feature_flag",
    ),
    Shape(
        "access token",
        "Resource Access Token Hook",
        _other_kind("access_token"),
        reaches_item=False,
        kind="access_token",
    ),
)
