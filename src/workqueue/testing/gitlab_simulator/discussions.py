"""Discussions (threads) of merge requests and issues, and who may edit a note.

After GitLab's `Discussion` / `IndividualNoteDiscussion` models, `Notes::BuildService`
and `NotePolicy`:

* `POST …/notes` (a plain comment): a new discussion of one note, `type` null,
  `individual_note: true`;
* `POST …/discussions` (start a thread): a new discussion whose note is a
  `DiscussionNote`;
* a reply in a thread: a `DiscussionNote` in the same discussion, internal if the
  thread is;
* a reply to a plain comment: the comment first becomes a `DiscussionNote`
  (GitLab's `convert_to_discussion!`, same discussion id), then as above;
* a reply to a system note: 400 `Discussion can not be replied to.` (inferred: a
  system note's discussion cannot be converted);
* an edit by the note's author, or by a Maintainer/Owner of the project: the body
  is replaced, `updated_at` moves, the `id` stays;
* an edit by anyone else, or of a system note: 403 `403 Forbidden`
  (`authorize! :admin_note`).

Discussions are listed in the order of their first note, notes in a discussion
by creation. GitLab's REST note entity has no `discussion_id`; the discussion
entity's `id` and the Note Hook's `object_attributes.discussion_id` carry it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from workqueue.testing.gitlab_simulator.entities import note_entity
from workqueue.testing.gitlab_simulator.errors import bad_request, forbidden
from workqueue.testing.gitlab_simulator.state import (
    MAINTAINER,
    Issue,
    MergeRequest,
    Note,
    Project,
    SimulatorState,
    User,
)

Noteable = MergeRequest | Issue
DISCUSSION_NOTE = "DiscussionNote"


@dataclass(frozen=True)
class Discussion:
    id: str
    notes: list[Note]

    @property
    def individual_note(self) -> bool:
        """GitLab's `IndividualNoteDiscussion`: a single note that is not a DiscussionNote."""
        return len(self.notes) == 1 and self.notes[0].type is None


def discussions_of(noteable: Noteable) -> list[Discussion]:
    grouped: dict[str, list[Note]] = {}
    for note in sorted(noteable.notes, key=lambda n: n.id):
        grouped.setdefault(note.discussion_id, []).append(note)
    return [Discussion(discussion_id, notes) for discussion_id, notes in grouped.items()]


def find_discussion(noteable: Noteable, discussion_id: str) -> Discussion | None:
    notes = sorted(
        (note for note in noteable.notes if note.discussion_id == discussion_id),
        key=lambda n: n.id,
    )
    return Discussion(discussion_id, notes) if notes else None


def discussion_entity(state: SimulatorState, discussion: Discussion) -> dict[str, Any]:
    """`API::Entities::Discussion` (GitLab 11.0 to 17.x: `id`, `individual_note`, `notes`)."""
    return {
        "id": discussion.id,
        "individual_note": discussion.individual_note,
        "notes": [note_entity(state, note) for note in discussion.notes],
    }


def start_thread(
    state: SimulatorState, noteable: Noteable, author: User, body: str, *, internal: bool = False
) -> Note:
    return state.add_note(noteable, author, body, internal=internal, note_type=DISCUSSION_NOTE)


def reply(
    state: SimulatorState, noteable: Noteable, discussion: Discussion, author: User, body: str
) -> Note:
    """A reply in `discussion`; it inherits the thread's internal flag, as in GitLab."""
    first = discussion.notes[0]
    if first.system:
        raise bad_request("Discussion can not be replied to.")
    if first.type is None:
        first.type = DISCUSSION_NOTE  # convert_to_discussion!: the comment becomes a thread
    return state.add_note(
        noteable,
        author,
        body,
        internal=first.internal,
        discussion_id=discussion.id,
        note_type=DISCUSSION_NOTE,
    )


def access_level(project: Project, user: User) -> int | None:
    member = project.members.get(user.id)
    return member.access_level if member is not None else None


def edit_note(state: SimulatorState, project: Project, note: Note, user: User, body: str) -> None:
    """`Notes::UpdateService` behind `authorize! :admin_note`: the author may edit their
    note, and so may a Maintainer or Owner of the project (`ProjectPolicy`); system notes
    are not editable."""
    level = access_level(project, user) or 0
    if note.system or (note.author.id != user.id and level < MAINTAINER):
        raise forbidden()
    note.body = body
    note.updated_at = state.now()
    note.updated_by = user
