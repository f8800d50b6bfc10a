"""Note Hook bodies for comments on merge requests and issues, after GitLab's
`Gitlab::DataBuilder::Note` and `Gitlab::HookData::NoteBuilder` / `IssueBuilder`.

`event_type` is `confidential_note` (sent as `Confidential Note Hook`) when the
note is internal or its issue is confidential (`note.confidential?(include_noteable:
true)`), else `note`. `object_attributes.type` is null for a plain comment and
`DiscussionNote` for a note of a thread (its start or a reply); `discussion_id` is
the thread's. `user` is who acted: the author on `create`, the last editor on
`update`. `action` (`create` or `update`) came with GitLab 15.x; older hooks have none.
"""

from __future__ import annotations

from typing import Any

from workqueue.testing.gitlab_simulator.state import (
    Issue,
    MergeRequest,
    Note,
    Project,
    SimulatorState,
    User,
)
from workqueue.testing.gitlab_simulator.webhooks import (
    hook_project,
    hook_repository,
    hook_user,
    hook_utc,
    label_attributes,
    mr_attributes,
)

NOTE_ACTIONS = ("create", "update")
_ISSUE_STATE_IDS = {"opened": 1, "closed": 2}


def issue_attributes(state: SimulatorState, project: Project, issue: Issue) -> dict[str, Any]:
    """The issue's `hook_attrs`, as Note Hooks on issues carry them."""
    return {
        "id": issue.id,
        "iid": issue.iid,
        "title": issue.title,
        "description": issue.description,
        "author_id": issue.author.id,
        "project_id": project.id,
        "created_at": hook_utc(issue.created_at),
        "updated_at": hook_utc(issue.updated_at),
        "updated_by_id": None,
        "last_edited_at": None,
        "last_edited_by_id": None,
        "closed_at": None,
        "confidential": issue.confidential,
        "discussion_locked": None,
        "due_date": None,
        "milestone_id": None,
        "moved_to_id": None,
        "duplicated_to_id": None,
        "relative_position": None,
        "state_id": _ISSUE_STATE_IDS.get(issue.state, 1),
        "state": issue.state,
        "time_estimate": 0,
        "total_time_spent": 0,
        "time_change": 0,
        "human_total_time_spent": None,
        "human_time_change": None,
        "human_time_estimate": None,
        "assignee_ids": [],
        "assignee_id": None,
        "labels": [label_attributes(project, name) for name in sorted(issue.labels)],
        "severity": "unknown",
        "type": "Issue",
        "url": f"{state.web_url}/{project.path_with_namespace}/-/issues/{issue.iid}",
    }


def is_confidential(note: Note, noteable: MergeRequest | Issue) -> bool:
    return note.internal or (isinstance(noteable, Issue) and noteable.confidential)


def note_hook(
    state: SimulatorState, note: Note, *, action: str = "create", user: User | None = None
) -> dict[str, Any]:
    if action not in NOTE_ACTIONS:
        raise ValueError(f"action must be one of {NOTE_ACTIONS}")
    project = state.projects[note.project_id]
    noteable = state.noteable_of(note)
    web_url = f"{state.web_url}/{project.path_with_namespace}"
    path = "issues" if isinstance(noteable, Issue) else "merge_requests"
    actor = user or (note.updated_by if action == "update" else None) or note.author
    payload: dict[str, Any] = {
        "object_kind": "note",
        "event_type": "confidential_note" if is_confidential(note, noteable) else "note",
        "user": hook_user(actor),
        "project_id": project.id,
        "project": hook_project(state, project),
        "repository": hook_repository(state, project),
        "object_attributes": {
            "id": note.id,
            "internal": note.internal,
            "confidential": note.internal,
            "note": note.body,
            "description": note.body,
            "noteable_type": note.noteable_type,
            "author_id": note.author.id,
            "created_at": hook_utc(note.created_at),
            "updated_at": hook_utc(note.updated_at),
            "updated_by_id": note.updated_by.id if note.updated_by is not None else None,
            "project_id": project.id,
            "attachment": None,
            "line_code": None,
            # MR notes carry "" here, issue notes null, as captured hooks show.
            "commit_id": "" if isinstance(noteable, MergeRequest) else None,
            "noteable_id": noteable.id,
            "system": note.system,
            "st_diff": None,
            "type": note.type,
            "discussion_id": note.discussion_id,
            "position": None,
            "original_position": None,
            "change_position": None,
            "resolved_at": None,
            "resolved_by_id": None,
            "resolved_by_push": None,
            "action": action,
            "url": f"{web_url}/-/{path}/{noteable.iid}#note_{note.id}",
        },
    }
    if isinstance(noteable, Issue):
        payload["issue"] = issue_attributes(state, project, noteable)
    else:
        payload["merge_request"] = mr_attributes(state, project, noteable)
    return payload
