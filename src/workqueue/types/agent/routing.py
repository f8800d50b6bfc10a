"""Which Note Hooks call the agent, and what of the note the service keeps. Pure.

A Note Hook is a hint like every hook, but what it asks for is read from it:
the note text and its author. So only what GitLab itself writes is taken (the
note's id, text, author, discussion and noteable, the project), the author's
access is read from GitLab afterwards (`access.py`), and anything unusual
creates nothing:

* another `object_kind`, a system note, an edit (`action: update`);
* a note on anything but a merge request or an issue (commits, snippets);
* a note that does not start with the trigger (after leading blanks), as a
  word of its own: `@workqueue-bot fix it`, not `@workqueue-botany`;
* a note by the service's own user (as the hook names it, and again as GitLab
  does once the note is read back);
* a project no `projects` pattern names (exactly, by its full path).

GitLab before 16.x sends no `action` (edits sent no hook then); the note id
makes a second delivery of the same note create nothing either way.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from workqueue.project_patterns import path_matches, scope_regexes

NOTEABLE_TYPES = {"MergeRequest": "merge_request", "Issue": "issue"}
# Notes GitLab sends to hooks subscribed to confidential (internal) notes.
CONFIDENTIAL_EVENT = "confidential_note"
# A namespace of its own for session ids: stable across restarts and replicas.
SESSION_NAMESPACE = uuid.UUID("6f1d3c2a-8e0b-4a7e-9c55-2b7f0a9d4e61")
_DISCUSSION = re.compile(r"^[0-9a-f]{40}$")


class Noteable(StrEnum):
    MERGE_REQUEST = "merge_request"
    ISSUE = "issue"


@dataclass(frozen=True, slots=True)
class TriggerNote:
    """A note that asks the agent for something, as GitLab's hook describes it."""

    project_id: int
    project: str  # full path, as GitLab spells it
    noteable: Noteable
    noteable_iid: int
    note_id: int
    discussion_id: str | None  # None: GitLab did not say (older versions)
    author_id: int
    author: str  # username
    text: str  # the note without the trigger
    internal: bool
    url: str | None  # the note on GitLab, as the hook says (checked by the creator)

    @property
    def session_id(self) -> uuid.UUID:
        """Stable per (project, noteable, discussion): a follow-up in the thread continues
        the conversation; a note outside any thread is a session of its own."""
        thread = self.discussion_id or f"note:{self.note_id}"
        key = f"{self.project_id}:{self.noteable.value}:{self.noteable_iid}:{thread}"
        return uuid.uuid5(SESSION_NAMESPACE, key)


def trigger_note(
    body: Mapping[str, Any], *, trigger: str, projects: list[str], bot_username: str | None
) -> TriggerNote | None:
    """The note `body` (a Note Hook) asks the agent for, or None when it asks nothing."""
    note = _read(body, trigger)
    if note is None:
        return None
    if bot_username is not None and note.author.lower() == bot_username.lower():
        return None
    if not path_matches(scope_regexes(projects, {}), note.project):
        return None
    return note


def _read(body: Mapping[str, Any], trigger: str) -> TriggerNote | None:
    """The hook's note when it is a new note asking after `trigger`, written by a person
    on an MR or an issue, and the hook is consistent about it."""
    if body.get("object_kind") != "note":
        return None
    note = _mapping(body.get("object_attributes"))
    user = _mapping(body.get("user"))
    project = _mapping(body.get("project"))
    noteable = NOTEABLE_TYPES.get(str(note.get("noteable_type")))
    text = after_trigger(note.get("note"), trigger)
    if (
        note.get("system") is True
        or note.get("action") not in {None, "create"}
        or noteable is None
        or text is None
    ):
        return None
    author, path = user.get("username"), project.get("path_with_namespace")
    # `user.id` is missing from older GitLab's hooks; the note's `author_id` never is.
    # Both are hints: the creator reads the note's author back from GitLab.
    note_id, author_id, project_id = note.get("id"), note.get("author_id"), project.get("id")
    iid = _mapping(body.get(noteable)).get("iid")
    consistent = (
        isinstance(author, str)
        and bool(author)
        and isinstance(path, str)
        and all(_is_int(value) for value in (note_id, author_id, project_id, iid))
    )
    if not consistent:
        return None
    discussion = note.get("discussion_id")
    return TriggerNote(
        project_id=int(project_id),  # type: ignore[arg-type]
        project=str(path),
        noteable=Noteable(noteable),
        noteable_iid=int(iid),  # type: ignore[arg-type]
        note_id=int(note_id),  # type: ignore[arg-type]
        discussion_id=(
            discussion if isinstance(discussion, str) and _DISCUSSION.match(discussion) else None
        ),
        author_id=int(author_id),  # type: ignore[arg-type]
        author=str(author),
        text=text,
        internal=body.get("event_type") == CONFIDENTIAL_EVENT or note.get("internal") is True,
        url=note.get("url") if isinstance(note.get("url"), str) else None,
    )


def after_trigger(note: Any, trigger: str) -> str | None:
    if not isinstance(note, str):
        return None
    stripped = note.lstrip()
    if not stripped.startswith(trigger):
        return None
    rest = stripped[len(trigger) :]
    if rest and not rest[0].isspace():
        return None  # another word that starts like the trigger
    return rest.strip()


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0
