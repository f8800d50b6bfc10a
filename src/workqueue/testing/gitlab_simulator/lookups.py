"""Finding the objects a route names, with GitLab's 404 for each kind."""

from __future__ import annotations

from workqueue.testing.gitlab_simulator.errors import not_found, record_not_found
from workqueue.testing.gitlab_simulator.routing import Request
from workqueue.testing.gitlab_simulator.state import (
    Issue,
    Job,
    MergeRequest,
    Note,
    Pipeline,
    Project,
    SimulatorState,
)


def project(state: SimulatorState, request: Request) -> Project:
    found = state.find_project(request.path_params["id"])
    if found is None:
        raise not_found("Project")
    return found


def merge_request(found_project: Project, request: Request) -> MergeRequest:
    raw = request.path_params["merge_request_iid"]
    mr = found_project.merge_requests.get(int(raw)) if raw.isdigit() else None
    if mr is None:
        raise record_not_found()
    return mr


def issue(found_project: Project, request: Request) -> Issue:
    raw = request.path_params["issue_iid"]
    found = found_project.issues.get(int(raw)) if raw.isdigit() else None
    if found is None:
        raise record_not_found()
    return found


def noteable(found_project: Project, request: Request) -> MergeRequest | Issue:
    """The MR or issue a notes or discussions route names (by the route's iid parameter)."""
    if "issue_iid" in request.path_params:
        return issue(found_project, request)
    return merge_request(found_project, request)


def note(found: MergeRequest | Issue, request: Request) -> Note:
    """`noteable.notes.find(note_id)`: a note of another noteable is RecordNotFound too."""
    raw = request.path_params["note_id"]
    for candidate in found.notes:
        if str(candidate.id) == raw:
            return candidate
    raise record_not_found()


def pipeline(state: SimulatorState, found_project: Project, request: Request) -> Pipeline:
    raw = request.path_params["pipeline_id"]
    found = state.pipelines.get(int(raw)) if raw.isdigit() else None
    if found is None or found.project_id != found_project.id:
        raise record_not_found()
    return found


def job(state: SimulatorState, found_project: Project, request: Request) -> Job:
    raw = request.path_params["job_id"]
    found = state.jobs.get(int(raw)) if raw.isdigit() else None
    if found is None or found.project_id != found_project.id:
        raise record_not_found()
    return found
