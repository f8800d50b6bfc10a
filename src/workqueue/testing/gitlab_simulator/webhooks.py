"""Webhook payloads built from the simulator state, and their delivery.

Shapes follow GitLab's data builders and the bodies captured from real GitLab
instances, including their timestamp styles: merge request, note, pipeline and
job hooks write `2025-03-01 10:00:00 UTC` (labels too), Job Hooks add
`build_*_at_iso` as `2025-03-01T10:00:00Z`, commit timestamps carry an offset.
User emails are `[REDACTED]` as GitLab sends them. What differs by GitLab
version (`versions`) follows `state.gitlab_version`: no `detailed_merge_status`
before 15.6, Job Hooks without `project` before 16.0. An internal note's hook
is a `Confidential Note Hook` (`event_type: confidential_note`); Note Hooks are
built in `note_hooks`.
"""

from __future__ import annotations

import json
import uuid
import zlib
from datetime import datetime
from typing import Any

import httpx

from workqueue.testing.gitlab_simulator.ci import (
    all_jobs,
    head_pipeline,
    latest_jobs,
    pipeline_status,
    pipeline_times,
)
from workqueue.testing.gitlab_simulator.diffs import diff_trees
from workqueue.testing.gitlab_simulator.mergeability import (
    blocking_discussions_resolved,
    detailed_merge_status,
    merge_status,
)
from workqueue.testing.gitlab_simulator.repository import ZERO_SHA, Commit
from workqueue.testing.gitlab_simulator.state import (
    Job,
    MergeRequest,
    Pipeline,
    Project,
    SimulatorState,
    User,
)
from workqueue.testing.gitlab_simulator.versions import (
    DEFAULT_GITLAB_VERSION,
    full_version,
    has_detailed_merge_status,
    job_hook_has_project,
)

EVENT_HEADERS = {
    "push": "Push Hook",
    "tag_push": "Tag Push Hook",
    "merge_request": "Merge Request Hook",
    "note": "Note Hook",
    "pipeline": "Pipeline Hook",
    "build": "Job Hook",
}
# `event_type` values whose hooks GitLab sends under their own header.
CONFIDENTIAL_EVENT_HEADERS = {
    "confidential_note": "Confidential Note Hook",
    "confidential_issue": "Confidential Issue Hook",
}
_STATE_IDS = {"opened": 1, "closed": 2, "merged": 3, "locked": 4}
_RUNNER = {
    "id": 12,
    "description": "simulated-runner",
    "runner_type": "instance_type",
    "active": True,
    "is_shared": True,
    "tags": [],
}


def hook_utc(value: datetime | None) -> str | None:
    return None if value is None else value.strftime("%Y-%m-%d %H:%M:%S UTC")


def hook_iso(value: datetime | None) -> str | None:
    return None if value is None else value.strftime("%Y-%m-%dT%H:%M:%SZ")


def _duration(start: datetime | None, end: datetime | None) -> float | None:
    if start is None or end is None:
        return None
    return round((end - start).total_seconds(), 1)


def hook_user(user: User) -> dict[str, Any]:
    return {
        "id": user.id,
        "name": user.name,
        "username": user.username,
        "avatar_url": None,
        "email": "[REDACTED]",
    }


def _urls(state: SimulatorState, project: Project) -> tuple[str, str, str]:
    web_url = f"{state.web_url}/{project.path_with_namespace}"
    host = state.web_url.split("://", 1)[-1]
    return web_url, f"git@{host}:{project.path_with_namespace}.git", f"{web_url}.git"


def hook_project(state: SimulatorState, project: Project, *, legacy: bool = True) -> dict[str, Any]:
    web_url, ssh_url, http_url = _urls(state, project)
    body: dict[str, Any] = {
        "id": project.id,
        "name": project.name,
        "description": project.description,
        "web_url": web_url,
        "avatar_url": None,
        "git_ssh_url": ssh_url,
        "git_http_url": http_url,
        "namespace": project.namespace,
        "visibility_level": 0,
        "path_with_namespace": project.path_with_namespace,
        "default_branch": project.default_branch,
        "ci_config_path": project.ci_config_path,
    }
    if legacy:
        # Deprecated aliases GitLab still sends in push, MR and note hooks.
        body.update({"homepage": web_url, "url": ssh_url, "ssh_url": ssh_url, "http_url": http_url})
    return body


def hook_repository(
    state: SimulatorState, project: Project, *, with_git_urls: bool = False
) -> dict[str, Any]:
    web_url, ssh_url, http_url = _urls(state, project)
    body: dict[str, Any] = {
        "name": project.name,
        "url": ssh_url,
        "description": project.description,
        "homepage": web_url,
    }
    if with_git_urls:
        body.update({"git_http_url": http_url, "git_ssh_url": ssh_url, "visibility_level": 0})
    return body


def hook_commit(state: SimulatorState, project: Project, commit: Commit) -> dict[str, Any]:
    return {
        "id": commit.id,
        "message": commit.message,
        "title": commit.title,
        "timestamp": commit.committed_at.isoformat(timespec="seconds"),
        "url": f"{state.web_url}/{project.path_with_namespace}/-/commit/{commit.id}",
        "author": {"name": commit.author.name, "email": commit.author.email},
    }


def event_header(payload: dict[str, Any]) -> str:
    """The `X-Gitlab-Event` GitLab sends a payload under."""
    confidential = CONFIDENTIAL_EVENT_HEADERS.get(str(payload.get("event_type")))
    return confidential or EVENT_HEADERS[str(payload["object_kind"])]


def mr_attributes(state: SimulatorState, project: Project, mr: MergeRequest) -> dict[str, Any]:
    """The MR's `hook_attrs`, shared by merge request and note hooks."""
    web_url = f"{state.web_url}/{project.path_with_namespace}"
    side = {
        "name": project.name,
        "web_url": web_url,
        "namespace": project.namespace,
        "path_with_namespace": project.path_with_namespace,
        "default_branch": project.default_branch,
        "git_http_url": f"{web_url}.git",
    }
    pipeline = head_pipeline(state, project, mr)
    commit = project.repository.commits.get(mr.sha)
    attributes = {
        "id": mr.id,
        "iid": mr.iid,
        "title": mr.title,
        "description": mr.description,
        "source_branch": mr.source_branch,
        "target_branch": mr.target_branch,
        "source_project_id": project.id,
        "target_project_id": project.id,
        "author_id": mr.author.id,
        "assignee_id": mr.assignee_ids[0] if mr.assignee_ids else None,
        "assignee_ids": list(mr.assignee_ids),
        "reviewer_ids": list(mr.reviewer_ids),
        "state_id": _STATE_IDS[mr.state],
        "state": mr.state,
        "draft": mr.draft,
        "work_in_progress": mr.draft,
        "first_contribution": False,
        "blocking_discussions_resolved": blocking_discussions_resolved(project, mr),
        "merge_status": merge_status(project, mr),
        "detailed_merge_status": detailed_merge_status(state, project, mr),
        "head_pipeline_id": pipeline.id if pipeline is not None else None,
        "merge_commit_sha": mr.merge_commit_sha,
        "merge_error": mr.merge_error,
        "merge_params": {
            "force_remove_source_branch": "1" if mr.force_remove_source_branch else "0"
        },
        "merge_user_id": mr.merge_user.id if mr.merge_user is not None else None,
        "merge_when_pipeline_succeeds": mr.merge_when_pipeline_succeeds,
        "milestone_id": None,
        "created_at": hook_utc(mr.created_at),
        "updated_at": hook_utc(mr.updated_at),
        "last_edited_at": None,
        "last_edited_by_id": None,
        "updated_by_id": None,
        "prepared_at": hook_utc(mr.prepared_at),
        "time_estimate": 0,
        "total_time_spent": 0,
        "time_change": 0,
        "human_total_time_spent": None,
        "human_time_change": None,
        "human_time_estimate": None,
        "url": f"{web_url}/-/merge_requests/{mr.iid}",
        "source": side,
        "target": dict(side),
        "last_commit": hook_commit(state, project, commit) if commit is not None else None,
        "labels": [label_attributes(project, name) for name in sorted(mr.labels)],
    }
    if not has_detailed_merge_status(state.gitlab_version):
        del attributes["detailed_merge_status"]
    return attributes


def label_attributes(project: Project, title: str) -> dict[str, Any]:
    return {
        "id": zlib.crc32(f"{project.id}:{title}".encode()) % 100000,
        "title": title,
        "color": "#6699cc",
        "project_id": project.id,
        "created_at": hook_utc(project.created_at),
        "updated_at": hook_utc(project.created_at),
        "template": False,
        "description": None,
        "type": "ProjectLabel",
        "group_id": None,
    }


def merge_request_hook(
    state: SimulatorState,
    project: Project,
    mr: MergeRequest,
    user: User,
    action: str,
    *,
    oldrev: str | None = None,
    changes: dict[str, Any] | None = None,
) -> dict[str, Any]:
    attributes = mr_attributes(state, project, mr)
    attributes["action"] = action
    if oldrev is not None:
        attributes["oldrev"] = oldrev
    payload: dict[str, Any] = {
        "object_kind": "merge_request",
        "event_type": "merge_request",
        "user": hook_user(user),
        "project": hook_project(state, project),
        "object_attributes": attributes,
        "labels": attributes["labels"],
        "changes": changes
        if changes is not None
        else {
            "updated_at": {"previous": hook_utc(mr.created_at), "current": hook_utc(mr.updated_at)}
        },
        "repository": hook_repository(state, project),
    }
    users = {u.id: u for u in state.users.values()}
    for key, ids in (("assignees", mr.assignee_ids), ("reviewers", mr.reviewer_ids)):
        if ids:
            payload[key] = [hook_user(users[i]) for i in ids if i in users]
    return payload


def _build(job: Job) -> dict[str, Any]:
    return {
        "id": job.id,
        "stage": job.stage,
        "name": job.name,
        "status": job.status,
        "created_at": hook_utc(job.created_at),
        "started_at": hook_utc(job.started_at),
        "finished_at": hook_utc(job.finished_at),
        "duration": _duration(job.started_at, job.finished_at),
        "queued_duration": _duration(job.created_at, job.started_at),
        "failure_reason": job.failure_reason if job.status == "failed" else None,
        "when": job.when,
        "manual": job.when == "manual",
        "allow_failure": job.allow_failure,
        "user": hook_user(job.user),
        "runner": dict(_RUNNER) if job.started_at is not None else None,
        "artifacts_file": {"filename": None, "size": None},
        "environment": None,
    }


def pipeline_hook(state: SimulatorState, pipeline: Pipeline) -> dict[str, Any]:
    project = state.projects[pipeline.project_id]
    status = pipeline_status(state, pipeline)
    started, finished = pipeline_times(state, pipeline)
    jobs = latest_jobs(state, pipeline)
    mr = project.merge_requests.get(pipeline.merge_request_iid or 0)
    stages = list(dict.fromkeys(state.jobs[i].stage for i in pipeline.job_ids))
    web_url = f"{state.web_url}/{project.path_with_namespace}"
    merge_request = None
    if mr is not None:
        merge_request = {
            "id": mr.id,
            "iid": mr.iid,
            "title": mr.title,
            "source_branch": mr.source_branch,
            "source_project_id": project.id,
            "target_branch": mr.target_branch,
            "target_project_id": project.id,
            "state": mr.state,
            "merge_status": merge_status(project, mr),
            "detailed_merge_status": detailed_merge_status(state, project, mr),
            "url": f"{web_url}/-/merge_requests/{mr.iid}",
        }
        if not has_detailed_merge_status(state.gitlab_version):
            del merge_request["detailed_merge_status"]
    duration = _duration(started, finished)
    return {
        "object_kind": "pipeline",
        "object_attributes": {
            "id": pipeline.id,
            "iid": pipeline.iid,
            "name": pipeline.name,
            # MR pipelines report the source branch here, not refs/merge-requests/...
            "ref": mr.source_branch if mr is not None else pipeline.ref,
            "tag": False,
            "sha": pipeline.sha,
            "before_sha": pipeline.before_sha,
            "source": pipeline.source,
            "status": status,
            "detailed_status": "passed" if status == "success" else status,
            "stages": stages,
            "created_at": hook_utc(pipeline.created_at),
            "finished_at": hook_utc(finished),
            "duration": int(duration) if duration is not None else None,
            "queued_duration": None,
            "protected_ref": project.is_protected(pipeline.ref),
            "variables": [
                {"key": variable["key"], "value": variable["value"]}
                for variable in pipeline.variables
            ],
            "url": f"{web_url}/-/pipelines/{pipeline.id}",
        },
        "merge_request": merge_request,
        "user": hook_user(pipeline.user),
        "project": hook_project(state, project, legacy=False),
        "commit": hook_commit(state, project, project.repository.commits[pipeline.sha]),
        "builds": [_build(job) for job in jobs],
    }


def job_hook(state: SimulatorState, job: Job) -> dict[str, Any]:
    pipeline = state.pipelines[job.pipeline_id]
    project = state.projects[job.project_id]
    commit = project.repository.commits[pipeline.sha]
    started, finished = pipeline_times(state, pipeline)
    retries = sum(
        1 for other in all_jobs(state, pipeline) if other.name == job.name and other.id < job.id
    )
    body: dict[str, Any] = {
        "object_kind": "build",
        "ref": pipeline.ref,
        "tag": False,
        "before_sha": pipeline.before_sha,
        "sha": pipeline.sha,
        "retries_count": retries,
        "build_id": job.id,
        "build_name": job.name,
        "build_stage": job.stage,
        "build_status": job.status,
        "build_created_at": hook_utc(job.created_at),
        "build_started_at": hook_utc(job.started_at),
        "build_finished_at": hook_utc(job.finished_at),
        "build_created_at_iso": hook_iso(job.created_at),
        "build_started_at_iso": hook_iso(job.started_at),
        "build_finished_at_iso": hook_iso(job.finished_at),
        "build_duration": _duration(job.started_at, job.finished_at),
        "build_queued_duration": _duration(job.created_at, job.started_at),
        "build_allow_failure": job.allow_failure,
        # The enum maps "no reason" to its first name, so non-failed jobs say unknown_failure.
        "build_failure_reason": job.failure_reason if job.status == "failed" else "unknown_failure",
        "pipeline_id": pipeline.id,
        "runner": dict(_RUNNER) if job.started_at is not None else None,
        "project_id": project.id,
        "project_name": project.path_with_namespace.replace("/", " / "),
        "user": hook_user(job.user),
        "commit": {
            "id": pipeline.id,
            "name": pipeline.name,
            "sha": pipeline.sha,
            "message": commit.message,
            "author_name": commit.author.name,
            "author_email": commit.author.email,
            "author_url": f"{state.web_url}/{job.user.username}",
            "status": pipeline_status(state, pipeline),
            "duration": _duration(started, finished),
            "started_at": hook_utc(started),
            "finished_at": hook_utc(finished),
            "started_at_iso": hook_iso(started),
            "finished_at_iso": hook_iso(finished),
        },
        "repository": hook_repository(state, project, with_git_urls=True),
        "project": hook_project(state, project, legacy=False),
        "environment": None,
    }
    if not job_hook_has_project(state.gitlab_version):
        # Before 16.0 a Job Hook names its project only by `project_id` (and the
        # display name `project_name`), and has no `*_iso` times.
        del body["project"]
        for key in [key for key in body if key.endswith("_iso")]:
            del body[key]
        for key in [key for key in body["commit"] if key.endswith("_iso")]:
            del body["commit"][key]
    return body


def _push_commit(state: SimulatorState, project: Project, commit: Commit) -> dict[str, Any]:
    repo = project.repository
    parent = repo.commits[commit.parent_ids[0]].tree if commit.parent_ids else {}
    diffs = diff_trees(parent, commit.tree)
    body = hook_commit(state, project, commit)
    body["added"] = [d.new_path for d in diffs if d.new_file]
    body["modified"] = [d.new_path for d in diffs if not d.new_file and not d.deleted_file]
    body["removed"] = [d.old_path for d in diffs if d.deleted_file]
    return body


def push_hook(
    state: SimulatorState, project: Project, branch: str, *, before: str, after: str, user: User
) -> dict[str, Any]:
    repo = project.repository
    if after == ZERO_SHA:
        commits: list[Commit] = []
    elif before == ZERO_SHA:
        default_head = repo.branches.get(project.default_branch)
        exclude = default_head if branch != project.default_branch else None
        commits = repo.log(after, exclude=exclude)
    else:
        commits = repo.log(after, exclude=before)
    newest_first_20 = commits[:20]
    return {
        "object_kind": "push",
        "event_name": "push",
        "before": before,
        "after": after,
        "ref": f"refs/heads/{branch}",
        "ref_protected": project.is_protected(branch),
        "checkout_sha": None if after == ZERO_SHA else after,
        "message": None,
        "user_id": user.id,
        "user_name": user.name,
        "user_username": user.username,
        "user_email": "",
        "user_avatar": None,
        "project_id": project.id,
        "project": hook_project(state, project),
        "commits": [_push_commit(state, project, c) for c in reversed(newest_first_20)],
        "total_commits_count": len(commits),
        "push_options": {},
        "repository": hook_repository(state, project, with_git_urls=True),
    }


def deliver(
    client: httpx.Client,
    url: str,
    payload: dict[str, Any],
    *,
    instance_url: str,
    secret_token: str | None = None,
    event_uuid: str | None = None,
    idempotency_key: str | None = None,
    timeout: float = 5.0,
    gitlab_version: str = DEFAULT_GITLAB_VERSION,
    event: str | None = None,
) -> httpx.Response:
    """POST one hook the way GitLab's `WebHookService` does (headers included); `event`
    overrides the `X-Gitlab-Event` derived from the payload (a System Hook, say)."""
    event = event or event_header(payload)
    headers = {
        "Content-Type": "application/json",
        "User-Agent": f"GitLab/{full_version(gitlab_version)}",
        "X-Gitlab-Event": event,
        "X-Gitlab-Instance": instance_url,
        "X-Gitlab-Webhook-UUID": str(uuid.uuid4()),
        "X-Gitlab-Event-UUID": event_uuid or str(uuid.uuid4()),
        "Idempotency-Key": idempotency_key or str(uuid.uuid4()),
    }
    if secret_token is not None:
        headers["X-Gitlab-Token"] = secret_token
    body = json.dumps(payload).encode("utf-8")
    return client.post(url, content=body, headers=headers, timeout=timeout)
