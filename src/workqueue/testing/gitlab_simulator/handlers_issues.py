"""Issues (`lib/api/issues.rb`): a single issue; its notes and discussions are served by
`handlers_notes` and `handlers_discussions`. Issues are created by the test helper
(`create_issue`) only, and confidential issues are readable by every token's user."""

from __future__ import annotations

from workqueue.testing.gitlab_simulator import lookups
from workqueue.testing.gitlab_simulator.entities import issue_entity
from workqueue.testing.gitlab_simulator.routing import Request, Response, Router, json_response
from workqueue.testing.gitlab_simulator.state import SimulatorState


def get_issue(state: SimulatorState, request: Request) -> Response:
    project = lookups.project(state, request)
    return json_response(issue_entity(state, project, lookups.issue(project, request)))


def register(router: Router) -> None:
    router.add("GET", "/projects/:id/issues/:issue_iid", get_issue)
