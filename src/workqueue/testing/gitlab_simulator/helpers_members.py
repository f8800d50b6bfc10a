"""Simulator helpers for project membership (access levels as `state.ACCESS_LEVELS`)."""

from __future__ import annotations

from workqueue.testing.gitlab_simulator.helpers_base import ProjectRef, SimulatorBase
from workqueue.testing.gitlab_simulator.state import ACCESS_LEVELS, ProjectMember


class MemberHelpers(SimulatorBase):
    """Who is a member of a project, at which level."""

    def add_member(self, project: ProjectRef, username: str, access_level: int) -> int:
        """Make `username` (created if unknown) a member of `project` at `access_level`
        (10 Guest, 20 Reporter, 30 Developer, 40 Maintainer, 50 Owner), replacing an
        earlier level; returns the user id."""
        if access_level not in ACCESS_LEVELS:
            raise ValueError(f"access_level must be one of {ACCESS_LEVELS}")
        with self._locked() as state:
            found = self._project(project)
            user = state.users.get(username) or state.add_user(username)
            earlier = found.members.get(user.id)
            found.members[user.id] = ProjectMember(
                user=user,
                access_level=access_level,
                created_at=earlier.created_at if earlier is not None else state.now(),
                created_by=earlier.created_by if earlier is not None else self.human,
            )
            return user.id

    def remove_member(self, project: ProjectRef, username: str) -> None:
        with self._locked() as state:
            self._project(project).members.pop(state.users[username].id, None)

    def access_level(self, project: ProjectRef, username: str) -> int | None:
        """The user's access level in `project`, None when not a member."""
        with self._locked() as state:
            member = self._project(project).members.get(state.users[username].id)
            return member.access_level if member is not None else None
