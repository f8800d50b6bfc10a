"""Project members (`lib/api/members.rb`).

The simulator has no groups, so a project's effective members (`members/all`,
direct plus inherited in GitLab) are its direct members. A user id that is not a
member is `404 Not found` (`find_by!` raising), an id that is not a number is
Grape's 400.
"""

from __future__ import annotations

from workqueue.testing.gitlab_simulator import lookups
from workqueue.testing.gitlab_simulator.entities import member_entity
from workqueue.testing.gitlab_simulator.errors import param_error, record_not_found
from workqueue.testing.gitlab_simulator.routing import (
    Request,
    Response,
    Router,
    json_response,
    paginate,
)
from workqueue.testing.gitlab_simulator.state import SimulatorState


def list_members(state: SimulatorState, request: Request) -> Response:
    project = lookups.project(state, request)
    members = sorted(project.members.values(), key=lambda m: m.user.id)
    return paginate(request, [member_entity(state, member) for member in members])


def get_member(state: SimulatorState, request: Request) -> Response:
    project = lookups.project(state, request)
    raw = request.path_params["user_id"]
    if not raw.isdigit():
        raise param_error("user_id is invalid")
    member = project.members.get(int(raw))
    if member is None:
        raise record_not_found()
    return json_response(member_entity(state, member))


def register(router: Router) -> None:
    for members in ("/projects/:id/members/all", "/projects/:id/members"):
        router.add("GET", members, list_members)
        router.add("GET", f"{members}/:user_id", get_member)
