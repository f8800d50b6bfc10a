"""Simulator helpers that put an MR in the merge states GitLab reports but the
simulator does not reach by itself: a pending check, requested changes, open
threads, a check it does not model (a blocking MR, Jira, status checks)."""

from __future__ import annotations

from workqueue.testing.gitlab_simulator.helpers_base import ProjectRef, SimulatorBase


class MergeabilityHelpers(SimulatorBase):
    def delay_mergeability(
        self, project: ProjectRef, iid: int, *, unchecked: int = 0, approvals_syncing: int = 0
    ) -> None:
        """Report `unchecked` for the next `unchecked` API reads of the MR, then
        (after any `checking` reads) `approvals_syncing` for `approvals_syncing` more."""
        with self._locked():
            _, mr = self._mr(project, iid)
            mr.unchecked_reads = unchecked
            mr.approvals_syncing_reads = approvals_syncing

    def request_changes(self, project: ProjectRef, iid: int, *, user: str | None = None) -> None:
        """A reviewer (default: the human) requests changes; their approval withdraws it."""
        with self._locked() as state:
            _, mr = self._mr(project, iid)
            reviewer = self._user(user, self.human)
            if reviewer not in mr.changes_requested_by:
                mr.changes_requested_by.append(reviewer)
            mr.updated_at = state.now()
            state.add_system_note(mr, reviewer, "requested changes")

    def open_discussion(self, project: ProjectRef, iid: int, body: str) -> None:
        """A resolvable thread by the human reviewer; blocks the merge when the
        project requires resolved discussions."""
        with self._locked() as state:
            _, mr = self._mr(project, iid)
            state.add_note(mr, self.human, body)
            mr.unresolved_discussions += 1

    def resolve_discussions(self, project: ProjectRef, iid: int) -> None:
        with self._locked() as state:
            _, mr = self._mr(project, iid)
            mr.unresolved_discussions = 0
            mr.updated_at = state.now()

    def block_merge(self, project: ProjectRef, iid: int, status: str | None) -> None:
        """Make the MR report `status` (e.g. `merge_request_blocked`) once the
        modelled checks pass; None lifts it."""
        with self._locked() as state:
            _, mr = self._mr(project, iid)
            mr.blocked_status = status
            mr.updated_at = state.now()
