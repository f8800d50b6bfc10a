"""Which Note Hooks call the agent: table tests of `trigger_note`."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from workqueue.types.agent.routing import Noteable, trigger_note

DISCUSSION = "0d9c87e01c56d9989006c29d9d9e91c9059d133f"


def hook(**overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "object_kind": "note",
        "event_type": "note",
        "user": {"id": 7, "username": "alice", "name": "Alice"},
        "project_id": 42,
        "project": {"id": 42, "path_with_namespace": "team/app"},
        "object_attributes": {
            "id": 1241,
            "note": "@workqueue-bot please bump the version",
            "noteable_type": "MergeRequest",
            "author_id": 7,
            "system": False,
            "action": "create",
            "discussion_id": DISCUSSION,
        },
        "merge_request": {"iid": 5},
    }
    for path, value in overrides.items():
        target = body
        *parents, last = path.split("__")
        for part in parents:
            target = target[part]
        if value is _DELETE:
            del target[last]
        else:
            target[last] = value
    return body


_DELETE = object()


def route(body: dict[str, Any], bot: str | None = "workqueue-bot"):
    return trigger_note(body, trigger="@workqueue-bot", projects=["team/*"], bot_username=bot)


def test_a_trigger_note_is_read():
    note = route(hook())
    assert note is not None
    assert (note.project, note.noteable, note.noteable_iid, note.note_id) == (
        "team/app",
        Noteable.MERGE_REQUEST,
        5,
        1241,
    )
    assert (note.author, note.author_id, note.discussion_id) == ("alice", 7, DISCUSSION)
    assert note.text == "please bump the version"
    assert note.internal is False


def test_an_issue_note_and_a_confidential_one():
    body = hook(object_attributes__noteable_type="Issue", event_type="confidential_note")
    body["issue"] = body.pop("merge_request")
    note = route(body)
    assert note is not None
    assert (note.noteable, note.internal) == (Noteable.ISSUE, True)


@pytest.mark.parametrize(
    "overrides",
    [
        {"object_kind": "merge_request"},
        {"object_attributes__system": True},
        {"object_attributes__action": "update"},  # an edit
        {"object_attributes__noteable_type": "Commit"},
        {"object_attributes__noteable_type": "Snippet"},
        {"object_attributes__note": "please @workqueue-bot do it"},  # not at the start
        {"object_attributes__note": "@workqueue-botany is a science"},  # another word
        {"object_attributes__note": None},
        {"user__username": "workqueue-bot"},  # the service's own note
        {"user__username": "WorkQueue-Bot"},
        {"project__path_with_namespace": "victim/prod"},  # no pattern names it
        {"project__path_with_namespace": "Team/app"},  # patterns are exact
        {"object_attributes__author_id": "7"},  # no id GitLab writes
        {"merge_request__iid": "5"},
        {"object_attributes__id": True},
        {"project__id": _DELETE},
    ],
)
def test_notes_that_ask_nothing_create_nothing(overrides):
    assert route(hook(**overrides)) is None


def test_leading_blanks_and_a_bare_trigger():
    note = route(hook(object_attributes__note="\n  @workqueue-bot"))
    assert note is not None
    assert note.text == ""


def test_older_gitlab_without_action_or_discussion():
    note = route(hook(object_attributes__action=_DELETE, object_attributes__discussion_id=_DELETE))
    assert note is not None
    assert note.discussion_id is None


def test_sessions_are_stable_per_thread():
    first = route(hook())
    follow_up = route(hook(object_attributes__id=1300))
    elsewhere = route(hook(object_attributes__discussion_id="f" * 40))
    other_mr = route(hook(merge_request__iid=6))
    assert first.session_id == follow_up.session_id
    assert len({first.session_id, elsewhere.session_id, other_mr.session_id}) == 3
    alone = route(hook(object_attributes__discussion_id=_DELETE))
    assert alone.session_id != first.session_id
    assert copy.deepcopy(alone).session_id == alone.session_id


def test_hooks_whose_user_has_no_id_are_read_by_the_notes_author_id():
    """Older GitLab (and the captured gitlab4j and go-scm bodies) send `user` without an
    `id`: the note's `author_id` names the author; GitLab confirms it afterwards."""
    note = route(hook(user__id=_DELETE))
    assert note is not None
    assert (note.author, note.author_id) == ("alice", 7)
