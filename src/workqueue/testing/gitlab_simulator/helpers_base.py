"""Shared plumbing of the simulator's Python helpers (lookups under the state lock)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from workqueue.testing.gitlab_simulator.state import MergeRequest, Project, SimulatorState, User

ProjectRef = int | str


class SimulatorBase:
    """What every helper group needs: the state, the two default users and lookups."""

    state: SimulatorState
    bot: User
    human: User

    @contextmanager
    def _locked(self) -> Iterator[SimulatorState]:
        with self.state.lock:
            yield self.state

    def _project(self, ref: ProjectRef) -> Project:
        project = self.state.find_project(ref)
        if project is None:
            raise KeyError(f"no simulated project {ref!r}")
        return project

    def _user(self, username: str | None, default: User) -> User:
        if username is None:
            return default
        return self.state.users[username]

    def _mr(self, project: ProjectRef, iid: int) -> tuple[Project, MergeRequest]:
        found = self._project(project)
        return found, found.merge_requests[iid]
