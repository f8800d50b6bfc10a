"""Discussions (threads) on merge requests and issues, driven through python-gitlab."""

from __future__ import annotations

import re

import gitlab
import pytest

HEX40 = re.compile(r"^[0-9a-f]{40}$")


@pytest.fixture
def mr(project, bot_branch):
    return project.mergerequests.create(
        {"source_branch": "bot/bump-requests", "target_branch": "main", "title": "Bump"}
    )


@pytest.fixture(params=["MergeRequest", "Issue"])
def noteable(request, sim, project, project_id, bot_branch):
    """The same behaviour on an MR and on an issue: (type name, iid, python-gitlab object)."""
    if request.param == "Issue":
        iid = sim.create_issue(project_id, "Agent task")
        return "Issue", iid, project.issues.get(iid)
    created = project.mergerequests.create(
        {"source_branch": "bot/bump-requests", "target_branch": "main", "title": "Bump"}
    )
    return "MergeRequest", created.iid, project.mergerequests.get(created.iid)


def test_a_plain_note_is_an_individual_discussion(sim, project_id, noteable):
    _, _, item = noteable
    note = item.notes.create({"body": "plain"})
    [discussion] = item.discussions.list(get_all=True)
    assert HEX40.match(discussion.id)
    assert discussion.individual_note is True
    [shown] = discussion.attributes["notes"]
    assert (shown["id"], shown["type"], shown["body"]) == (note.id, None, "plain")
    assert sim.note_discussion_id(note.id) == discussion.id
    assert item.discussions.get(discussion.id).attributes["notes"][0]["id"] == note.id


def test_start_a_thread_and_reply(sim, project_id, noteable):
    kind, iid, item = noteable
    thread = item.discussions.create({"body": "Should the agent retry?"})
    assert HEX40.match(thread.id)
    assert thread.individual_note is False
    [first] = thread.attributes["notes"]
    assert first["type"] == "DiscussionNote"

    reply_id = sim.add_comment(
        project_id, kind, iid, "Yes, once.", user="ada", discussion_id=thread.id
    )
    answer = thread.notes.create({"body": "Retrying."})
    assert (answer.type, answer.author["username"]) == ("DiscussionNote", "workqueue-bot")

    notes = sim.discussion(project_id, kind, iid, thread.id)
    assert [n["id"] for n in notes] == [first["id"], reply_id, answer.id]
    assert [n["body"] for n in notes] == ["Should the agent retry?", "Yes, once.", "Retrying."]
    assert {n["noteable_type"] for n in notes} == {kind}
    fetched = item.discussions.get(thread.id)
    assert [n["id"] for n in fetched.attributes["notes"]] == [n["id"] for n in notes]
    assert thread.notes.get(reply_id).body == "Yes, once."


def test_replying_to_a_plain_note_turns_it_into_a_thread(sim, project_id, noteable):
    kind, iid, item = noteable
    note_id = sim.add_comment(project_id, kind, iid, "@workqueue-bot explain", user="ada")
    discussion_id = sim.note_discussion_id(note_id)
    item.discussions.get(discussion_id).notes.create({"body": "Here is why."})
    discussion = item.discussions.get(discussion_id)
    assert discussion.individual_note is False
    assert [n["type"] for n in discussion.attributes["notes"]] == ["DiscussionNote"] * 2
    assert discussion.attributes["notes"][0]["id"] == note_id
    assert sim.note_hook(note_id)["object_attributes"]["type"] == "DiscussionNote"


def test_mr_threads_are_resolvable_and_plain_notes_are_not(sim, project_id, mr, project):
    item = project.mergerequests.get(mr.iid)
    plain = item.notes.create({"body": "plain"})
    thread = item.discussions.create({"body": "thread"})
    assert plain.resolvable is False
    assert not hasattr(plain, "resolved")
    first = thread.attributes["notes"][0]
    assert (first["resolvable"], first["resolved"], first["resolved_by"]) == (True, False, None)


def test_replies_in_an_internal_thread_are_internal(sim, project_id, noteable):
    kind, iid, item = noteable
    note = item.notes.create({"body": "members only", "internal": True})
    discussion_id = sim.note_discussion_id(note.id)
    reply = item.discussions.get(discussion_id).notes.create({"body": "agreed"})
    assert reply.internal is True
    public = sim.add_comment(project_id, kind, iid, "public", user="ada")
    public_thread = sim.note_discussion_id(public)
    with pytest.raises(ValueError, match="internal"):
        sim.add_comment(
            project_id, kind, iid, "x", user="ada", discussion_id=public_thread, internal=True
        )


def test_discussions_are_listed_oldest_first_and_paginated(sim, project_id, noteable, api):
    kind, iid, item = noteable
    for index in range(3):
        sim.add_comment(project_id, kind, iid, f"comment {index}", user="ada")
    listed = item.discussions.list(get_all=True)
    assert [d.attributes["notes"][0]["body"] for d in listed] == [f"comment {i}" for i in range(3)]
    path = "issues" if kind == "Issue" else "merge_requests"
    page = api.get(f"/projects/{project_id}/{path}/{iid}/discussions", params={"per_page": 2})
    assert (len(page.json()), page.headers["X-Total"], page.headers["X-Next-Page"]) == (2, "3", "2")
    second = api.get(
        f"/projects/{project_id}/{path}/{iid}/discussions", params={"page": 2, "per_page": 2}
    )
    assert [d["notes"][0]["body"] for d in second.json()] == ["comment 2"]


def test_an_unknown_discussion_is_404_discussion_not_found(sim, project_id, noteable, api):
    kind, iid, item = noteable
    path = "issues" if kind == "Issue" else "merge_requests"
    missing = "0" * 40
    answer = api.get(f"/projects/{project_id}/{path}/{iid}/discussions/{missing}")
    assert (answer.status_code, answer.json()) == (404, {"message": "404 Discussion Not Found"})
    reply = api.post(
        f"/projects/{project_id}/{path}/{iid}/discussions/{missing}/notes", json={"body": "x"}
    )
    assert (reply.status_code, reply.json()) == (404, {"message": "404 Discussion Not Found"})
    with pytest.raises(gitlab.GitlabGetError):
        item.discussions.get(missing)


def test_a_thread_needs_a_body(sim, project_id, noteable, api):
    kind, iid, _ = noteable
    path = "issues" if kind == "Issue" else "merge_requests"
    answer = api.post(f"/projects/{project_id}/{path}/{iid}/discussions", json={})
    assert (answer.status_code, answer.json()) == (400, {"error": "body is missing"})


def test_a_system_note_cannot_be_replied_to(sim, project_id, mr, api):
    sim.approve(project_id, mr.iid)  # writes the "approved this merge request" system note
    [system] = [n for n in sim.notes(project_id, mr.iid) if n["system"]]
    discussion_id = sim.note_discussion_id(system["id"])
    answer = api.post(
        f"/projects/{project_id}/merge_requests/{mr.iid}/discussions/{discussion_id}/notes",
        json={"body": "x"},
    )
    assert (answer.status_code, answer.json()) == (
        400,
        {"message": "400 Bad request - Discussion can not be replied to."},
    )


def test_editing_keeps_the_id_and_moves_updated_at(sim, project_id, noteable):
    kind, iid, item = noteable
    thread = item.discussions.create({"body": "draft answer"})
    note = thread.notes.get(thread.attributes["notes"][0]["id"])
    before = note.updated_at
    note.body = "final answer"
    note.save()
    [shown] = sim.discussion(project_id, kind, iid, thread.id)
    assert (shown["id"], shown["body"]) == (note.id, "final answer")
    assert shown["updated_at"] >= before
    assert shown["created_at"] == thread.attributes["notes"][0]["created_at"]


def test_mr_notes_can_be_edited_through_the_notes_route(sim, project, mr):
    item = project.mergerequests.get(mr.iid)
    note = item.notes.create({"body": "v1"})
    item.notes.update(note.id, {"body": "v2"})
    assert item.notes.get(note.id).body == "v2"


def test_only_the_author_or_a_maintainer_may_edit(sim, project_id, noteable, client_factory, api):
    kind, iid, _ = noteable
    path = "issues" if kind == "Issue" else "merge_requests"
    note_id = sim.add_comment(project_id, kind, iid, "ada's words", user="ada")
    sim.add_member(project_id, "dev", 30)
    sim.add_user("maint", token="maint-token")
    sim.add_member(project_id, "maint", 40)
    sim.state.tokens["dev-token"] = sim.state.users["dev"]

    url = f"/projects/{project_id}/{path}/{iid}/notes/{note_id}"
    by_bot = api.put(url, json={"body": "bot's words"})  # the bot is a Developer
    assert (by_bot.status_code, by_bot.json()) == (403, {"message": "403 Forbidden"})
    as_dev = client_factory(private_token="dev-token").projects.get(project_id, lazy=True)
    noteable_api = as_dev.issues if kind == "Issue" else as_dev.mergerequests
    with pytest.raises(gitlab.GitlabUpdateError) as caught:
        noteable_api.get(iid, lazy=True).notes.update(note_id, {"body": "dev's words"})
    assert caught.value.response_code == 403
    assert (
        sim.discussion(project_id, kind, iid, sim.note_discussion_id(note_id))[0]["body"]
        == "ada's words"
    )

    as_maintainer = client_factory(private_token="maint-token").projects.get(project_id, lazy=True)
    maintained = as_maintainer.issues if kind == "Issue" else as_maintainer.mergerequests
    maintained.get(iid, lazy=True).notes.update(note_id, {"body": "moderated"})
    assert sim.note_hook(note_id, "update")["user"]["username"] == "maint"


def test_an_edit_needs_a_body_that_is_not_blank(sim, project_id, noteable, api):
    kind, iid, item = noteable
    path = "issues" if kind == "Issue" else "merge_requests"
    note = item.notes.create({"body": "v1"})
    blank = api.put(f"/projects/{project_id}/{path}/{iid}/notes/{note.id}", json={"body": " "})
    assert (blank.status_code, blank.json()) == (400, {"error": "body is empty"})
    discussion_id = sim.note_discussion_id(note.id)
    neither = api.put(
        f"/projects/{project_id}/{path}/{iid}/discussions/{discussion_id}/notes/{note.id}", json={}
    )
    assert neither.status_code == 400
    assert neither.json() == {
        "error": "body, resolved are missing, exactly one parameter must be provided"
    }


def test_system_notes_are_not_editable(sim, project_id, mr, api):
    sim.approve(project_id, mr.iid)
    sim.add_member(project_id, "workqueue-bot", 50)
    [system] = [n for n in sim.notes(project_id, mr.iid) if n["system"]]
    answer = api.put(
        f"/projects/{project_id}/merge_requests/{mr.iid}/notes/{system['id']}", json={"body": "x"}
    )
    assert answer.status_code == 403


def test_edit_comment_helper_follows_the_same_rule(sim, project_id, mr):
    note_id = sim.add_comment(project_id, "MergeRequest", mr.iid, "typo", user="ada")
    sim.edit_comment(note_id, "fixed")
    assert sim.notes(project_id, mr.iid)[-1]["body"] == "fixed"
    sim.add_member(project_id, "dev", 30)
    with pytest.raises(Exception, match="403"):
        sim.edit_comment(note_id, "hijacked", user="dev")
