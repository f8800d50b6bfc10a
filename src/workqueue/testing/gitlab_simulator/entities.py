"""JSON representations of the model, field for field after GitLab's `API::Entities`.

Timestamps use the API's format (`2025-03-01T10:00:00.000Z`; commit dates keep
an offset, `2025-03-01T10:00:00.000+00:00`). Lists of merge requests use the
smaller `MergeRequestBasic` entity, which has no `head_pipeline`, `diff_refs`,
`changes_count` or `user` — as on GitLab, read those with a single GET.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from workqueue.testing.gitlab_simulator.ci import (
    head_pipeline,
    pipeline_status,
    pipeline_times,
)
from workqueue.testing.gitlab_simulator.diffs import FileDiff, diff_trees
from workqueue.testing.gitlab_simulator.mergeability import (
    blocking_discussions_resolved,
    detailed_merge_status,
    merge_status,
)
from workqueue.testing.gitlab_simulator.repository import Commit
from workqueue.testing.gitlab_simulator.state import (
    Issue,
    Job,
    MergeRequest,
    Note,
    Pipeline,
    Project,
    ProjectMember,
    SimulatorState,
    User,
)
from workqueue.testing.gitlab_simulator.versions import has_detailed_merge_status


def api_time(value: datetime | None) -> str | None:
    if value is None:
        return None
    return value.strftime("%Y-%m-%dT%H:%M:%S.") + f"{value.microsecond // 1000:03d}Z"


def commit_time(value: datetime) -> str:
    return value.strftime("%Y-%m-%dT%H:%M:%S.") + f"{value.microsecond // 1000:03d}+00:00"


def _seconds(start: datetime | None, end: datetime | None) -> float | None:
    if start is None or end is None:
        return None
    return round((end - start).total_seconds(), 3)


def project_url(state: SimulatorState, project: Project) -> str:
    return f"{state.web_url}/{project.path_with_namespace}"


def user_entity(state: SimulatorState, user: User) -> dict[str, Any]:
    return {
        "id": user.id,
        "username": user.username,
        "name": user.name,
        "state": "active",
        "locked": False,
        "avatar_url": None,
        "web_url": f"{state.web_url}/{user.username}",
    }


def project_entity(state: SimulatorState, project: Project) -> dict[str, Any]:
    web_url = project_url(state, project)
    host = state.web_url.split("://", 1)[-1]
    return {
        "id": project.id,
        "description": project.description,
        "name": project.name,
        "name_with_namespace": project.path_with_namespace.replace("/", " / "),
        "path": project.name,
        "path_with_namespace": project.path_with_namespace,
        "created_at": api_time(project.created_at),
        # Empty repositories report the preferred default branch name, as GitLab 14+ does.
        "default_branch": project.default_branch,
        # The "CI/CD configuration file" setting: null or "" when unset (real answers show both).
        "ci_config_path": project.ci_config_path,
        "tag_list": [],
        "topics": [],
        "ssh_url_to_repo": f"git@{host}:{project.path_with_namespace}.git",
        "http_url_to_repo": f"{web_url}.git",
        "web_url": web_url,
        "readme_url": None,
        "avatar_url": None,
        "forks_count": 0,
        "star_count": 0,
        "last_activity_at": api_time(project.created_at),
        "namespace": {
            "id": project.id * 10,
            "name": project.namespace.rsplit("/", 1)[-1],
            "path": project.namespace.rsplit("/", 1)[-1],
            "kind": "group",
            "full_path": project.namespace,
            "parent_id": None,
            "avatar_url": None,
            "web_url": f"{state.web_url}/groups/{project.namespace}",
        },
        "empty_repo": project.repository.empty,
        "archived": False,
        "visibility": "private",
        "merge_requests_enabled": True,
        "jobs_enabled": True,
        "merge_method": project.merge_method,
        # EE: merged-results pipelines and merge trains.
        "merge_pipelines_enabled": project.merge_pipelines_enabled,
        "merge_trains_enabled": project.merge_trains_enabled,
        "merge_trains_skip_train_allowed": project.merge_trains_skip_train_allowed,
        "squash_option": "default_off",
        "only_allow_merge_if_pipeline_succeeds": project.only_allow_merge_if_pipeline_succeeds,
        "allow_merge_on_skipped_pipeline": project.allow_merge_on_skipped_pipeline,
        "only_allow_merge_if_all_discussions_are_resolved": False,
        "remove_source_branch_after_merge": True,
        "approvals_before_merge": project.approvals_required,
        "permissions": {"project_access": {"access_level": 30}, "group_access": None},
    }


def commit_entity(state: SimulatorState, project: Project, commit: Commit) -> dict[str, Any]:
    return {
        "id": commit.id,
        "short_id": commit.short_id,
        "created_at": commit_time(commit.committed_at),
        "parent_ids": list(commit.parent_ids),
        "title": commit.title,
        "message": commit.message,
        "author_name": commit.author.name,
        "author_email": commit.author.email,
        "authored_date": commit_time(commit.authored_at),
        "committer_name": commit.committer.name,
        "committer_email": commit.committer.email,
        "committed_date": commit_time(commit.committed_at),
        "trailers": {},
        "extended_trailers": {},
        "web_url": f"{project_url(state, project)}/-/commit/{commit.id}",
    }


def commit_diffs(project: Project, commit: Commit) -> list[FileDiff]:
    repo = project.repository
    parent_tree = repo.commits[commit.parent_ids[0]].tree if commit.parent_ids else {}
    return diff_trees(parent_tree, commit.tree)


def commit_detail(
    state: SimulatorState, project: Project, commit: Commit, *, stats: bool = True
) -> dict[str, Any]:
    body = commit_entity(state, project, commit)
    if stats:
        diffs = commit_diffs(project, commit)
        additions = sum(d.additions for d in diffs)
        deletions = sum(d.deletions for d in diffs)
        body["stats"] = {
            "additions": additions,
            "deletions": deletions,
            "total": additions + deletions,
        }
    body.update({"status": None, "project_id": project.id, "last_pipeline": None})
    return body


def branch_entity(state: SimulatorState, project: Project, name: str) -> dict[str, Any]:
    repo = project.repository
    protected = project.is_protected(name)
    return {
        "name": name,
        "merged": repo.is_merged_into(name, project.default_branch),
        "protected": protected,
        "default": name == project.default_branch,
        # As GitLab (15-17) answers: false for an unprotected branch too (any Developer
        # may push and merge there); a protected branch here lets Maintainers only.
        "developers_can_push": False,
        "developers_can_merge": False,
        "can_push": not protected,
        "web_url": f"{project_url(state, project)}/-/tree/{name}",
        "commit": commit_entity(state, project, repo.commits[repo.branches[name]]),
    }


def pipeline_basic(state: SimulatorState, pipeline: Pipeline) -> dict[str, Any]:
    project = state.projects[pipeline.project_id]
    return {
        "id": pipeline.id,
        "iid": pipeline.iid,
        "project_id": pipeline.project_id,
        "sha": pipeline.sha,
        "ref": pipeline.ref,
        "status": pipeline_status(state, pipeline),
        "source": pipeline.source,
        "created_at": api_time(pipeline.created_at),
        "updated_at": api_time(pipeline.updated_at),
        "web_url": f"{project_url(state, project)}/-/pipelines/{pipeline.id}",
    }


_STATUS_TEXT = {
    "success": ("passed", "success"),
    "failed": ("failed", "failed"),
    "running": ("running", "running"),
    "pending": ("pending", "pending"),
    "canceled": ("canceled", "canceled"),
    "skipped": ("skipped", "skipped"),
    "created": ("created", "created"),
    "manual": ("manual", "manual"),
}


def detailed_status(status: str, details_path: str) -> dict[str, Any]:
    text, group = _STATUS_TEXT.get(status, (status, status))
    return {
        "icon": f"status_{group}",
        "text": text,
        "label": text,
        "group": group,
        "tooltip": text,
        "has_details": True,
        "details_path": details_path,
        "illustration": None,
        "favicon": f"/assets/ci_favicons/favicon_status_{group}.png",
    }


def pipeline_entity(state: SimulatorState, pipeline: Pipeline) -> dict[str, Any]:
    body = pipeline_basic(state, pipeline)
    started, finished = pipeline_times(state, pipeline)
    project = state.projects[pipeline.project_id]
    body.update(
        {
            "name": pipeline.name,
            "before_sha": pipeline.before_sha,
            "tag": False,
            "yaml_errors": None,
            "user": user_entity(state, pipeline.user),
            "started_at": api_time(started),
            "finished_at": api_time(finished),
            "committed_at": None,
            "duration": _seconds(started, finished),
            "queued_duration": None,
            "coverage": None,
            "detailed_status": detailed_status(
                body["status"], f"/{project.path_with_namespace}/-/pipelines/{pipeline.id}"
            ),
        }
    )
    return body


def job_entity(state: SimulatorState, job: Job) -> dict[str, Any]:
    pipeline = state.pipelines[job.pipeline_id]
    project = state.projects[job.project_id]
    repo = project.repository
    body: dict[str, Any] = {
        "id": job.id,
        "status": job.status,
        "stage": job.stage,
        "name": job.name,
        "ref": pipeline.ref,
        "tag": False,
        "coverage": None,
        "allow_failure": job.allow_failure,
        "created_at": api_time(job.created_at),
        "started_at": api_time(job.started_at),
        "finished_at": api_time(job.finished_at),
        "erased_at": None,
        "duration": _seconds(job.started_at, job.finished_at),
        "queued_duration": _seconds(job.created_at, job.started_at),
        "user": user_entity(state, job.user),
        "commit": commit_entity(state, project, repo.commits[pipeline.sha]),
        "pipeline": pipeline_basic(state, pipeline),
        "web_url": f"{project_url(state, project)}/-/jobs/{job.id}",
        "project": {"ci_job_token_scope_enabled": False},
        "artifacts": [],
        "runner": None,
        "runner_manager": None,
        "artifacts_expire_at": None,
        "archived": False,
        "tag_list": [],
    }
    # GitLab exposes failure_reason only on failed jobs.
    if job.status == "failed":
        body["failure_reason"] = job.failure_reason
    return body


def note_entity(state: SimulatorState, note: Note) -> dict[str, Any]:
    """`API::Entities::Note`: no `discussion_id` (read it from the discussions API).

    Threads on MRs are resolvable; GitLab made issue threads resolvable too in recent
    releases (16.x), which the simulator does not model: they report `resolvable: false`.
    """
    resolvable = (
        note.type == "DiscussionNote" and not note.system and note.noteable_type == "MergeRequest"
    )
    body: dict[str, Any] = {
        "id": note.id,
        "type": note.type,
        "body": note.body,
        "attachment": None,
        "author": user_entity(state, note.author),
        "created_at": api_time(note.created_at),
        "updated_at": api_time(note.updated_at),
        "system": note.system,
        "noteable_id": note.noteable_id,
        "noteable_type": note.noteable_type,
        "project_id": note.project_id,
        "noteable_iid": note.noteable_iid,
        "resolvable": resolvable,
        "confidential": note.internal,
        "internal": note.internal,
        "imported": False,
        "imported_from": "none",
        "commands_changes": {},
    }
    if resolvable:
        body.update({"resolved": False, "resolved_by": None, "resolved_at": None})
    return body


def issue_entity(state: SimulatorState, project: Project, issue: Issue) -> dict[str, Any]:
    """`API::Entities::Issue` (no milestones, assignees, epics or time tracking)."""
    web_url = f"{project_url(state, project)}/-/issues/{issue.iid}"
    return {
        "id": issue.id,
        "iid": issue.iid,
        "project_id": issue.project_id,
        "title": issue.title,
        "description": issue.description,
        "state": issue.state,
        "created_at": api_time(issue.created_at),
        "updated_at": api_time(issue.updated_at),
        "closed_at": None,
        "closed_by": None,
        "labels": sorted(issue.labels),
        "milestone": None,
        "assignees": [],
        "author": user_entity(state, issue.author),
        "type": "ISSUE",
        "assignee": None,
        "user_notes_count": sum(1 for note in issue.notes if not note.system),
        "merge_requests_count": 0,
        "upvotes": 0,
        "downvotes": 0,
        "due_date": None,
        "confidential": issue.confidential,
        "discussion_locked": None,
        "issue_type": "issue",
        "web_url": web_url,
        "time_stats": {
            "time_estimate": 0,
            "total_time_spent": 0,
            "human_time_estimate": None,
            "human_total_time_spent": None,
        },
        "task_completion_status": {"count": 0, "completed_count": 0},
        "has_tasks": False,
        "task_status": "",
        "blocking_issues_count": 0,
        "_links": {
            "self": f"{state.web_url}/api/v4/projects/{project.id}/issues/{issue.iid}",
            "notes": f"{state.web_url}/api/v4/projects/{project.id}/issues/{issue.iid}/notes",
            "award_emoji": (
                f"{state.web_url}/api/v4/projects/{project.id}/issues/{issue.iid}/award_emoji"
            ),
            "project": f"{state.web_url}/api/v4/projects/{project.id}",
            "closed_as_duplicate_of": None,
        },
        "references": {
            "short": f"#{issue.iid}",
            "relative": f"#{issue.iid}",
            "full": f"{project.path_with_namespace}#{issue.iid}",
        },
        "severity": "UNKNOWN",
        "moved_to_id": None,
        "imported": False,
        "imported_from": "none",
        "service_desk_reply_to": None,
    }


def member_entity(state: SimulatorState, member: ProjectMember) -> dict[str, Any]:
    """`API::Entities::Member`: the user's basic fields, `access_level` and who added them."""
    body = user_entity(state, member.user)
    body.update(
        {
            "access_level": member.access_level,
            "created_at": api_time(member.created_at),
            "created_by": (
                user_entity(state, member.created_by) if member.created_by is not None else None
            ),
            "expires_at": None,
            "membership_state": "active",
        }
    )
    return body


def mr_diff_refs(project: Project, mr: MergeRequest) -> dict[str, Any] | None:
    repo = project.repository
    target = repo.branches.get(mr.target_branch)
    if target is None:
        return None
    return {
        "base_sha": repo.merge_base(target, mr.sha),
        "head_sha": mr.sha,
        "start_sha": target,
    }


def mr_diffs(project: Project, mr: MergeRequest) -> list[FileDiff]:
    """The MR's changes: from the merge base with the target to the source head."""
    repo = project.repository
    target = repo.branches.get(mr.target_branch)
    base = repo.merge_base(target, mr.sha) if target is not None else None
    base_tree = repo.commits[base].tree if base is not None else {}
    # Memoised by sha (commits never change): every single GET reports changes_count.
    diffs = repo.memo(
        "diffs", (base, mr.sha), lambda: tuple(diff_trees(base_tree, repo.commits[mr.sha].tree))
    )
    return list(diffs)


def _users(state: SimulatorState, ids: list[int]) -> list[dict[str, Any]]:
    by_id = {user.id: user for user in state.users.values()}
    return [user_entity(state, by_id[i]) for i in ids if i in by_id]


def mr_basic(state: SimulatorState, project: Project, mr: MergeRequest) -> dict[str, Any]:
    status = merge_status(project, mr)
    assignees = _users(state, mr.assignee_ids)
    body = {
        "id": mr.id,
        "iid": mr.iid,
        "project_id": mr.project_id,
        "title": mr.title,
        "description": mr.description,
        "state": mr.state,
        "created_at": api_time(mr.created_at),
        "updated_at": api_time(mr.updated_at),
        "merged_by": user_entity(state, mr.merge_user) if mr.merged_at and mr.merge_user else None,
        "merge_user": user_entity(state, mr.merge_user) if mr.merge_user else None,
        "merged_at": api_time(mr.merged_at),
        "closed_by": user_entity(state, mr.closed_by) if mr.closed_by else None,
        "closed_at": api_time(mr.closed_at),
        "target_branch": mr.target_branch,
        "source_branch": mr.source_branch,
        "user_notes_count": sum(1 for note in mr.notes if not note.system),
        "upvotes": 0,
        "downvotes": 0,
        "author": user_entity(state, mr.author),
        "assignees": assignees,
        "assignee": assignees[0] if assignees else None,
        "reviewers": _users(state, mr.reviewer_ids),
        "source_project_id": mr.project_id,
        "target_project_id": mr.project_id,
        "labels": sorted(mr.labels),
        "draft": mr.draft,
        "work_in_progress": mr.draft,
        "milestone": None,
        "merge_when_pipeline_succeeds": mr.merge_when_pipeline_succeeds,
        "merge_status": status,
        "detailed_merge_status": detailed_merge_status(state, project, mr),
        "merge_after": None,
        "sha": mr.sha,
        "merge_commit_sha": mr.merge_commit_sha,
        "squash_commit_sha": mr.squash_commit_sha,
        "discussion_locked": None,
        "should_remove_source_branch": mr.should_remove_source_branch,
        "force_remove_source_branch": mr.force_remove_source_branch,
        "prepared_at": api_time(mr.prepared_at),
        "reference": f"!{mr.iid}",
        "references": {
            "short": f"!{mr.iid}",
            "relative": f"!{mr.iid}",
            "full": f"{project.path_with_namespace}!{mr.iid}",
        },
        "web_url": f"{project_url(state, project)}/-/merge_requests/{mr.iid}",
        "time_stats": {
            "time_estimate": 0,
            "total_time_spent": 0,
            "human_time_estimate": None,
            "human_total_time_spent": None,
        },
        "squash": mr.squash,
        "squash_on_merge": mr.squash,
        "task_completion_status": {"count": 0, "completed_count": 0},
        "has_conflicts": status == "cannot_be_merged",
        "blocking_discussions_resolved": blocking_discussions_resolved(project, mr),
        "approvals_before_merge": None,
    }
    if not has_detailed_merge_status(state.gitlab_version):
        del body["detailed_merge_status"]  # added in GitLab 15.6 (`versions`)
    return body


def mr_entity(state: SimulatorState, project: Project, mr: MergeRequest) -> dict[str, Any]:
    body = mr_basic(state, project, mr)
    pipeline = head_pipeline(state, project, mr)
    prepared = mr.prepared_at is not None
    body.update(
        {
            "subscribed": True,
            "changes_count": str(len(mr_diffs(project, mr))) if prepared else None,
            "latest_build_started_at": None,
            "latest_build_finished_at": None,
            "first_deployed_to_production_at": None,
            "pipeline": pipeline_basic(state, pipeline) if pipeline else None,
            "head_pipeline": pipeline_entity(state, pipeline) if pipeline else None,
            "diff_refs": mr_diff_refs(project, mr) if prepared else None,
            "merge_error": mr.merge_error,
            "first_contribution": False,
            "user": {"can_merge": True},
        }
    )
    return body
