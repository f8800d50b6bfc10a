"""Notes of merge requests and issues, and MR approvals (`lib/api/notes.rb`,
`merge_request_approvals.rb`).

Notes are served under both `merge_requests/:merge_request_iid` and
`issues/:issue_iid`, as GitLab's one `Notes` API does for each noteable type.
Creating a note does not touch the noteable's `updated_at` (GitLab's
`Note#touch_noteable` does), and quick actions in a body are not run.

Approval rules are reduced to one number per project (`approvals_required`); as
with EE's default `merge_requests_author_approval: false`, authors cannot approve
their own merge requests.
"""

from __future__ import annotations

from typing import Any

from workqueue.testing.gitlab_simulator import lookups
from workqueue.testing.gitlab_simulator.discussions import access_level, edit_note
from workqueue.testing.gitlab_simulator.entities import api_time, note_entity, user_entity
from workqueue.testing.gitlab_simulator.errors import (
    bad_request,
    conflict,
    forbidden,
    missing_params,
    not_found,
    param_error,
    unauthorized,
)
from workqueue.testing.gitlab_simulator.mergeability import merge_status
from workqueue.testing.gitlab_simulator.params import bool_param, str_param
from workqueue.testing.gitlab_simulator.routing import (
    Request,
    Response,
    Router,
    json_response,
    paginate,
)
from workqueue.testing.gitlab_simulator.state import (
    MAINTAINER,
    MergeRequest,
    Project,
    SimulatorState,
    User,
)
from workqueue.testing.gitlab_simulator.trains import settle


def create_note(state: SimulatorState, request: Request) -> Response:
    """`internal` (15.5+), or its deprecated name `confidential`, makes an internal note."""
    project = lookups.project(state, request)
    noteable = lookups.noteable(project, request)
    body = str_param(request.params, "body")
    if body is None:
        raise missing_params("body")
    if not body.strip():
        raise param_error("body is empty")
    internal = (
        bool_param(request.params, "internal") is True
        or bool_param(request.params, "confidential") is True
    )
    note = state.add_note(noteable, request.current_user, body, internal=internal)
    return json_response(note_entity(state, note), status=201)


def list_notes(state: SimulatorState, request: Request) -> Response:
    project = lookups.project(state, request)
    noteable = lookups.noteable(project, request)
    order_by = str_param(request.params, "order_by") or "created_at"
    if order_by not in {"created_at", "updated_at"}:
        raise param_error("order_by does not have a valid value")
    descending = (str_param(request.params, "sort") or "desc") != "asc"
    notes = sorted(noteable.notes, key=lambda n: (getattr(n, order_by), n.id), reverse=descending)
    return paginate(request, [note_entity(state, note) for note in notes])


def get_note(state: SimulatorState, request: Request) -> Response:
    """A note of another noteable, or none, is `404 Not found` (`notes.find` raising)."""
    project = lookups.project(state, request)
    noteable = lookups.noteable(project, request)
    return json_response(note_entity(state, lookups.note(noteable, request)))


def update_note(state: SimulatorState, request: Request) -> Response:
    """`PUT …/notes/:note_id` and `PUT …/discussions/:discussion_id/notes/:note_id`.

    Like GitLab's `update_note` helper, the discussion id in the path is not checked
    against the note's. Without `body`, GitLab fails validation ("can't be blank");
    the message's hash syntax is Ruby's, as GitLab 17.x renders it (inferred).
    """
    body = str_param(request.params, "body")
    if body is not None and not body.strip():
        raise param_error("body is empty")
    project = lookups.project(state, request)
    noteable = lookups.noteable(project, request)
    note = lookups.note(noteable, request)
    if body is None:
        if not (note.author.id == request.current_user.id or _maintains(project, request)):
            raise forbidden()
        raise bad_request('Failed to save note {:note=>["can\'t be blank"]}')
    edit_note(state, project, note, request.current_user, body)
    return json_response(note_entity(state, note))


def _maintains(project: Project, request: Request) -> bool:
    return (access_level(project, request.current_user) or 0) >= MAINTAINER


def approvals_entity(
    state: SimulatorState, project: Project, mr: MergeRequest, viewer: User
) -> dict[str, Any]:
    approved_ids = {user.id for user in mr.approved_by}
    left = max(project.approvals_required - len(mr.approved_by), 0)
    return {
        "id": mr.id,
        "iid": mr.iid,
        "project_id": project.id,
        "title": mr.title,
        "description": mr.description,
        "state": mr.state,
        "created_at": api_time(mr.created_at),
        "updated_at": api_time(mr.updated_at),
        "merge_status": merge_status(project, mr),
        "approved": left == 0,
        "approvals_required": project.approvals_required,
        "approvals_left": left,
        "require_password_to_approve": False,
        "approved_by": [{"user": user_entity(state, user)} for user in mr.approved_by],
        "suggested_approvers": [],
        "approvers": [],
        "approver_groups": [],
        "user_has_approved": viewer.id in approved_ids,
        "user_can_approve": viewer.id not in approved_ids and viewer.id != mr.author.id,
        "approval_rules_left": [],
        "has_approval_rules": project.approvals_required > 0,
        "merge_request_approvers_available": True,
        "multiple_approval_rules_available": True,
        "invalid_approvers_rules": [],
    }


def get_approvals(state: SimulatorState, request: Request) -> Response:
    project = lookups.project(state, request)
    mr = lookups.merge_request(project, request)
    return json_response(approvals_entity(state, project, mr, request.current_user))


def approve(
    state: SimulatorState, project: Project, mr: MergeRequest, user: User, sha: str | None
) -> None:
    """Shared by the API and the test helper, so both enforce the same rules."""
    if sha and sha != mr.sha:
        raise conflict(f"SHA does not match HEAD of source branch: {mr.sha}")
    if mr.state != "opened" or user.id == mr.author.id or user in mr.approved_by:
        raise unauthorized()
    mr.approved_by.append(user)
    if user in mr.changes_requested_by:
        mr.changes_requested_by.remove(user)  # approving withdraws the request
    mr.updated_at = state.now()
    state.add_system_note(mr, user, "approved this merge request")
    settle(state, project)


def unapprove(state: SimulatorState, mr: MergeRequest, user: User) -> None:
    if user not in mr.approved_by:
        raise not_found()
    mr.approved_by.remove(user)
    mr.updated_at = state.now()
    state.add_system_note(mr, user, "unapproved this merge request")


def post_approve(state: SimulatorState, request: Request) -> Response:
    project = lookups.project(state, request)
    mr = lookups.merge_request(project, request)
    approve(state, project, mr, request.current_user, str_param(request.params, "sha"))
    return json_response(approvals_entity(state, project, mr, request.current_user), status=201)


def post_unapprove(state: SimulatorState, request: Request) -> Response:
    project = lookups.project(state, request)
    mr = lookups.merge_request(project, request)
    unapprove(state, mr, request.current_user)
    return json_response(approvals_entity(state, project, mr, request.current_user), status=201)


NOTEABLE_PATHS = (
    "/projects/:id/merge_requests/:merge_request_iid",
    "/projects/:id/issues/:issue_iid",
)


def register(router: Router) -> None:
    for noteable in NOTEABLE_PATHS:
        router.add("GET", f"{noteable}/notes", list_notes)
        router.add("POST", f"{noteable}/notes", create_note)
        router.add("GET", f"{noteable}/notes/:note_id", get_note)
        router.add("PUT", f"{noteable}/notes/:note_id", update_note)
    item = NOTEABLE_PATHS[0]
    router.add("GET", f"{item}/approvals", get_approvals)
    router.add("POST", f"{item}/approve", post_approve)
    router.add("POST", f"{item}/unapprove", post_unapprove)
