"""Discussions of merge requests and issues (`lib/api/discussions.rb`); the rules are in
`discussions`.

Not simulated: diff threads (`position`, DiffNote), resolving (`resolved`, answered
400 here), deleting notes, and `created_at` overrides. `POST …/discussions` takes no
`internal` flag in GitLab (17.x declares only `body`, `position`, `created_at`), so an
internal thread starts as an internal note (`POST …/notes` with `internal`) that others
reply to.
"""

from __future__ import annotations

from workqueue.testing.gitlab_simulator import lookups
from workqueue.testing.gitlab_simulator.discussions import (
    Discussion,
    discussion_entity,
    discussions_of,
    find_discussion,
    reply,
    start_thread,
)
from workqueue.testing.gitlab_simulator.entities import note_entity
from workqueue.testing.gitlab_simulator.errors import missing_params, not_found, param_error
from workqueue.testing.gitlab_simulator.handlers_notes import NOTEABLE_PATHS, update_note
from workqueue.testing.gitlab_simulator.params import str_param
from workqueue.testing.gitlab_simulator.routing import (
    Request,
    Response,
    Router,
    json_response,
    paginate,
)
from workqueue.testing.gitlab_simulator.state import Issue, MergeRequest, SimulatorState


def _required_body(request: Request) -> str:
    body = str_param(request.params, "body")
    if body is None:
        raise missing_params("body")
    if not body.strip():
        raise param_error("body is empty")
    return body


def _discussion(noteable: MergeRequest | Issue, request: Request) -> Discussion:
    found = find_discussion(noteable, request.path_params["discussion_id"])
    if found is None:
        raise not_found("Discussion")
    return found


def list_discussions(state: SimulatorState, request: Request) -> Response:
    project = lookups.project(state, request)
    noteable = lookups.noteable(project, request)
    entities = [discussion_entity(state, d) for d in discussions_of(noteable)]
    return paginate(request, entities)


def get_discussion(state: SimulatorState, request: Request) -> Response:
    project = lookups.project(state, request)
    noteable = lookups.noteable(project, request)
    return json_response(discussion_entity(state, _discussion(noteable, request)))


def create_discussion(state: SimulatorState, request: Request) -> Response:
    """Start a thread: 201 with the Discussion (its one DiscussionNote)."""
    body = _required_body(request)
    project = lookups.project(state, request)
    noteable = lookups.noteable(project, request)
    note = start_thread(state, noteable, request.current_user, body)
    return json_response(discussion_entity(state, Discussion(note.discussion_id, [note])), 201)


def add_discussion_note(state: SimulatorState, request: Request) -> Response:
    """Reply in a thread: 201 with the new Note."""
    body = _required_body(request)
    project = lookups.project(state, request)
    noteable = lookups.noteable(project, request)
    discussion = _discussion(noteable, request)
    note = reply(state, noteable, discussion, request.current_user, body)
    return json_response(note_entity(state, note), status=201)


def list_discussion_notes(state: SimulatorState, request: Request) -> Response:
    project = lookups.project(state, request)
    noteable = lookups.noteable(project, request)
    found = find_discussion(noteable, request.path_params["discussion_id"])
    if found is None:
        raise not_found("Notes")
    return json_response([note_entity(state, note) for note in found.notes])


def get_discussion_note(state: SimulatorState, request: Request) -> Response:
    """Like GitLab's `get_note`: the discussion id in the path is not checked."""
    project = lookups.project(state, request)
    noteable = lookups.noteable(project, request)
    return json_response(note_entity(state, lookups.note(noteable, request)))


def update_discussion_note(state: SimulatorState, request: Request) -> Response:
    has_body = request.params.get("body") is not None
    has_resolved = request.params.get("resolved") is not None
    if has_body == has_resolved:
        if has_body:
            raise param_error("body, resolved are mutually exclusive")
        raise param_error("body, resolved are missing, exactly one parameter must be provided")
    if has_resolved:
        # A simulator limit, not a GitLab answer: resolving threads is not modelled.
        raise param_error("resolved is not supported by the GitLab simulator")
    return update_note(state, request)


def register(router: Router) -> None:
    for noteable in NOTEABLE_PATHS:
        discussions = f"{noteable}/discussions"
        one = f"{discussions}/:discussion_id"
        router.add("GET", discussions, list_discussions)
        router.add("POST", discussions, create_discussion)
        router.add("GET", one, get_discussion)
        router.add("GET", f"{one}/notes", list_discussion_notes)
        router.add("POST", f"{one}/notes", add_discussion_note)
        router.add("GET", f"{one}/notes/:note_id", get_discussion_note)
        router.add("PUT", f"{one}/notes/:note_id", update_discussion_note)
