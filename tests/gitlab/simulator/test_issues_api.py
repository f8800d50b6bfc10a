"""Issues and their notes, driven through python-gitlab as the service drives GitLab."""

from __future__ import annotations

import gitlab
import pytest


def test_an_issue_is_read_by_iid(sim, project, project_id):
    iid = sim.create_issue(project_id, "Agent: summarise the flaky tests", author="ada")
    issue = project.issues.get(iid)
    assert (issue.iid, issue.title, issue.state) == (
        iid,
        "Agent: summarise the flaky tests",
        "opened",
    )
    assert issue.author["username"] == "ada"
    assert issue.confidential is False
    assert issue.web_url == f"{sim.url}/acme/platform/widgets/-/issues/{iid}"
    assert issue.references["full"] == f"acme/platform/widgets#{iid}"
    assert sim.issue(project_id, iid)["id"] == issue.id


def test_issue_iids_count_per_project_and_ids_are_their_own(sim, project_id):
    first = sim.create_issue(project_id, "one")
    second = sim.create_issue(project_id, "two", confidential=True)
    assert (first, second) == (1, 2)
    assert sim.issue(project_id, second)["confidential"] is True
    assert sim.issue(project_id, first)["id"] != sim.issue(project_id, first)["iid"]


def test_a_missing_issue_is_404_not_found(sim, project, api):
    with pytest.raises(gitlab.GitlabGetError) as caught:
        project.issues.get(99)
    assert caught.value.response_code == 404
    answer = api.get(f"/projects/{project.id}/issues/99")
    assert answer.json() == {"message": "404 Not found"}


def test_issue_notes_create_list_get_and_edit(sim, project, project_id):
    iid = sim.create_issue(project_id, "Agent task")
    issue = project.issues.get(iid)
    note = issue.notes.create({"body": "Working on it."})
    assert note.author["username"] == "workqueue-bot"
    assert (note.noteable_type, note.noteable_iid, note.type) == ("Issue", iid, None)
    assert note.noteable_id == issue.id
    assert not hasattr(note, "discussion_id")  # as GitLab: only discussions carry it

    sim.add_comment(project_id, "Issue", iid, "@workqueue-bot thanks", user="ada")
    bodies = [n.body for n in issue.notes.list(get_all=True, sort="asc")]
    assert bodies == ["Working on it.", "@workqueue-bot thanks"]
    assert issue.notes.get(note.id).body == "Working on it."

    created_at = note.created_at
    note.body = "Done: 3 flaky tests."
    note.save()
    edited = issue.notes.get(note.id)
    assert (edited.id, edited.body, edited.created_at) == (
        note.id,
        "Done: 3 flaky tests.",
        created_at,
    )
    assert edited.updated_at >= created_at
    assert sim.issue_notes(project_id, iid)[0]["body"] == "Done: 3 flaky tests."


def test_issue_notes_can_be_internal(sim, project, project_id):
    iid = sim.create_issue(project_id, "Agent task")
    issue = project.issues.get(iid)
    internal = issue.notes.create({"body": "for members", "internal": True})
    legacy = issue.notes.create({"body": "also internal", "confidential": True})
    public = issue.notes.create({"body": "for everyone"})
    assert (internal.internal, internal.confidential) == (True, True)
    assert legacy.internal is True
    assert public.internal is False


def test_a_note_of_another_issue_is_404(sim, project, project_id, api):
    first = sim.create_issue(project_id, "one")
    second = sim.create_issue(project_id, "two")
    note_id = sim.add_comment(project_id, "Issue", first, "hi", user="ada")
    answer = api.get(f"/projects/{project_id}/issues/{second}/notes/{note_id}")
    assert (answer.status_code, answer.json()) == (404, {"message": "404 Not found"})
    with pytest.raises(gitlab.GitlabGetError):
        project.issues.get(second).notes.get(note_id)
