"""The current user (`lib/api/users.rb`: `GET /user`)."""

from __future__ import annotations

from typing import Any

from workqueue.testing.gitlab_simulator.entities import user_entity
from workqueue.testing.gitlab_simulator.routing import Request, Response, Router, json_response
from workqueue.testing.gitlab_simulator.state import SimulatorState, User


def current_user_entity(state: SimulatorState, user: User) -> dict[str, Any]:
    """`Entities::UserPublic`: what GitLab answers a user asking about themselves.

    `commit_email` is GitLab's `commit_email_or_default`, the address it writes
    as author and committer of commits made through the API.
    """
    body = user_entity(state, user)
    body.update(
        {
            "created_at": "2024-01-01T00:00:00.000Z",
            "bio": "",
            "location": "",
            "public_email": None,
            "website_url": "",
            "organization": "",
            "job_title": "",
            "pronouns": None,
            "bot": False,
            "work_information": None,
            "local_time": None,
            "last_sign_in_at": None,
            "confirmed_at": "2024-01-01T00:00:00.000Z",
            "last_activity_on": None,
            "email": user.email,
            "theme_id": 1,
            "color_scheme_id": 1,
            "projects_limit": 100000,
            "current_sign_in_at": None,
            "identities": [],
            "can_create_group": True,
            "can_create_project": True,
            "two_factor_enabled": False,
            "external": False,
            "private_profile": False,
            "commit_email": user.email,
        }
    )
    return body


def get_current_user(state: SimulatorState, request: Request) -> Response:
    return json_response(current_user_entity(state, request.current_user))


def register(router: Router) -> None:
    router.add("GET", "/user", get_current_user)
