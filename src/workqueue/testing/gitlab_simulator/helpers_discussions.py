"""Simulator helpers for issues, comments and threads: a test acts as a person commenting
(`add_comment`, `edit_comment`) and reads what the service wrote (`discussion`)."""

from __future__ import annotations

from typing import Any, Literal

from workqueue.testing.gitlab_simulator.discussions import (
    discussion_entity,
    discussions_of,
    edit_note,
    find_discussion,
    reply,
)
from workqueue.testing.gitlab_simulator.entities import issue_entity, note_entity
from workqueue.testing.gitlab_simulator.helpers_base import ProjectRef, SimulatorBase
from workqueue.testing.gitlab_simulator.state import Issue, MergeRequest, User

NoteableType = Literal["MergeRequest", "Issue"]


class DiscussionHelpers(SimulatorBase):
    """Issues, comments on MRs and issues, and their discussions."""

    def create_issue(
        self,
        project: ProjectRef,
        title: str,
        *,
        author: str | None = None,
        confidential: bool = False,
        description: str = "",
    ) -> int:
        """Open an issue as `author` (default: the human reviewer); returns its iid."""
        with self._locked() as state:
            found = self._project(project)
            now = state.now()
            issue = Issue(
                id=state.next_id("issue"),
                iid=found.next_issue_iid,
                project_id=found.id,
                title=title,
                description=description,
                author=self._user(author, self.human),
                created_at=now,
                updated_at=now,
                confidential=confidential,
            )
            found.next_issue_iid += 1
            found.issues[issue.iid] = issue
            return issue.iid

    def issue(self, project: ProjectRef, iid: int) -> dict[str, Any]:
        """The issue as GET would return it."""
        with self._locked() as state:
            found = self._project(project)
            return issue_entity(state, found, found.issues[iid])

    def add_comment(
        self,
        project: ProjectRef,
        noteable_type: NoteableType,
        iid: int,
        body: str,
        *,
        user: str,
        discussion_id: str | None = None,
        internal: bool = False,
    ) -> int:
        """`user` comments on the MR or issue (the user is created if unknown); with
        `discussion_id` it replies in that thread, which decides whether the reply is
        internal (passing `internal=True` to a public thread is an error). Returns the
        note id; `note_hook(note_id)` builds the hook GitLab would send."""
        with self._locked() as state:
            noteable = self._noteable(project, noteable_type, iid)
            author = self._user_or_new(user)
            if discussion_id is None:
                return state.add_note(noteable, author, body, internal=internal).id
            found = find_discussion(noteable, discussion_id)
            if found is None:
                raise KeyError(f"no discussion {discussion_id} on {noteable_type} {iid}")
            if internal and not found.notes[0].internal:
                raise ValueError("a reply is internal only in an internal thread")
            return reply(state, noteable, found, author, body).id

    def edit_comment(self, note_id: int, body: str, *, user: str | None = None) -> None:
        """Edit a note as `user` (default: its author), with GitLab's permission rule
        (the author, or a Maintainer/Owner); a refusal raises `ApiError` (403)."""
        with self._locked() as state:
            note = state.notes[note_id]
            editor = note.author if user is None else self._user(user, note.author)
            edit_note(state, state.projects[note.project_id], note, editor, body)

    def discussion(
        self, project: ProjectRef, noteable_type: NoteableType, iid: int, discussion_id: str
    ) -> list[dict[str, Any]]:
        """The notes of one thread as the REST API renders them, oldest first."""
        with self._locked() as state:
            found = find_discussion(self._noteable(project, noteable_type, iid), discussion_id)
            if found is None:
                raise KeyError(f"no discussion {discussion_id} on {noteable_type} {iid}")
            return [note_entity(state, note) for note in found.notes]

    def discussions(
        self, project: ProjectRef, noteable_type: NoteableType, iid: int
    ) -> list[dict[str, Any]]:
        """Every discussion of the MR or issue as `GET …/discussions` renders them."""
        with self._locked() as state:
            noteable = self._noteable(project, noteable_type, iid)
            return [discussion_entity(state, d) for d in discussions_of(noteable)]

    def issue_notes(self, project: ProjectRef, iid: int) -> list[dict[str, Any]]:
        with self._locked() as state:
            return [note_entity(state, n) for n in self._noteable(project, "Issue", iid).notes]

    def note_discussion_id(self, note_id: int) -> str:
        """The discussion a note belongs to (the REST note entity does not say)."""
        with self._locked() as state:
            return state.notes[note_id].discussion_id

    def _noteable(
        self, project: ProjectRef, noteable_type: NoteableType, iid: int
    ) -> MergeRequest | Issue:
        found = self._project(project)
        if noteable_type == "Issue":
            return found.issues[iid]
        if noteable_type == "MergeRequest":
            return found.merge_requests[iid]
        raise ValueError(f"noteable_type must be 'MergeRequest' or 'Issue', not {noteable_type!r}")

    def _user_or_new(self, username: str) -> User:
        return self.state.users.get(username) or self.state.add_user(username)
