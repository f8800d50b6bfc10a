"""Note Hooks for comments on merge requests and issues: the shapes GitLab sends (our own
fixtures, written after bodies captured from real GitLab), discussion ids and types,
actions, confidentiality and the X-Gitlab-Event header."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hook_shapes import assert_shape

FIXTURES = Path(__file__).parent / "fixtures"
HOOK_TIME = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC$")


def fixture(name):
    return json.loads((FIXTURES / f"hook_{name}.json").read_text())


@pytest.fixture
def mr_iid(project, bot_branch):
    return project.mergerequests.create(
        {"source_branch": "bot/bump-requests", "target_branch": "main", "title": "Bump"}
    ).iid


def test_a_reply_on_an_issue_has_the_real_shape(sim, project_id):
    iid = sim.create_issue(project_id, "Agent: tidy the changelog")
    first = sim.add_comment(project_id, "Issue", iid, "@workqueue-bot tidy it", user="ada")
    thread = sim.note_discussion_id(first)
    reply = sim.add_comment(
        project_id, "Issue", iid, "@workqueue-bot again", user="grace", discussion_id=thread
    )
    payload = sim.note_hook(reply)
    assert_shape(payload, fixture("note_issue_reply"))
    attributes = payload["object_attributes"]
    assert (attributes["type"], attributes["discussion_id"]) == ("DiscussionNote", thread)
    assert (attributes["noteable_type"], attributes["noteable_id"]) == (
        "Issue",
        sim.issue(project_id, iid)["id"],
    )
    assert attributes["url"].endswith(f"/-/issues/{iid}#note_{reply}")
    assert HOOK_TIME.match(attributes["created_at"])
    assert payload["issue"]["iid"] == iid
    assert "merge_request" not in payload
    assert payload["user"]["username"] == "grace"
    assert set(payload["user"]) == {"id", "name", "username", "avatar_url", "email"}


def test_an_mr_note_keeps_the_existing_shape_and_gains_its_discussion(sim, project_id, mr_iid):
    note = sim.add_note(project_id, mr_iid, "@workqueue-bot rebase")
    payload = sim.note_hook(note)
    assert_shape(payload, fixture("note"))
    attributes = payload["object_attributes"]
    assert attributes["type"] is None  # a plain comment
    assert attributes["discussion_id"] == sim.note_discussion_id(note)
    assert (attributes["action"], attributes["commit_id"]) == ("create", "")
    assert payload["merge_request"]["iid"] == mr_iid
    assert sim.note_hook_event(note) == "Note Hook"


def test_a_thread_started_through_the_api_is_a_discussion_note(sim, project, project_id, mr_iid):
    thread = project.mergerequests.get(mr_iid).discussions.create({"body": "Question"})
    note_id = thread.attributes["notes"][0]["id"]
    attributes = sim.note_hook(note_id)["object_attributes"]
    assert (attributes["type"], attributes["discussion_id"]) == ("DiscussionNote", thread.id)
    assert sim.note_hook(note_id)["user"]["username"] == "workqueue-bot"


def test_an_edit_is_an_update_by_the_editor(sim, project_id, mr_iid):
    note = sim.add_comment(project_id, "MergeRequest", mr_iid, "v1", user="ada")
    sim.edit_comment(note, "v2")
    payload = sim.note_hook(note, action="update")
    attributes = payload["object_attributes"]
    assert (attributes["action"], attributes["note"]) == ("update", "v2")
    assert attributes["updated_by_id"] == sim.human.id
    assert payload["user"]["username"] == "ada"
    with pytest.raises(ValueError, match="action"):
        sim.note_hook(note, action="delete")


@pytest.mark.parametrize("where", ["internal MR note", "internal issue note", "confidential issue"])
def test_confidential_notes_are_confidential_note_hooks(sim, project_id, mr_iid, where, receiver):
    if where == "internal MR note":
        note = sim.add_comment(project_id, "MergeRequest", mr_iid, "x", user="ada", internal=True)
    elif where == "internal issue note":
        iid = sim.create_issue(project_id, "task")
        note = sim.add_comment(project_id, "Issue", iid, "x", user="ada", internal=True)
    else:
        iid = sim.create_issue(project_id, "secret task", confidential=True)
        note = sim.add_comment(project_id, "Issue", iid, "x", user="ada")
    payload = sim.note_hook(note)
    assert payload["event_type"] == "confidential_note"
    internal = where != "confidential issue"
    flags = payload["object_attributes"]["internal"], payload["object_attributes"]["confidential"]
    assert flags == (internal, internal)
    assert sim.note_hook_event(note) == "Confidential Note Hook"
    assert sim.send_webhook(receiver.url, payload).status_code == 200
    assert receiver.deliveries[-1].headers["X-Gitlab-Event"] == "Confidential Note Hook"


def test_issue_note_hooks_go_through_project_hooks(sim, project_id, receiver):
    sim.add_project_hook(project_id, receiver.url, secret_token="s3cret")
    iid = sim.create_issue(project_id, "task")
    note = sim.add_comment(project_id, "Issue", iid, "@workqueue-bot go", user="ada")
    [delivery] = sim.emit(sim.note_hook(note))
    assert (delivery.kind, delivery.outcome) == ("note", "delivered")
    [received] = receiver.deliveries
    assert received.headers["X-Gitlab-Event"] == "Note Hook"
    assert received.payload["object_attributes"]["noteable_type"] == "Issue"
