"""Merge requests through `GitLabClient`: create, find, read, update, close, merge, notes."""

from __future__ import annotations

import pytest
from gitlab_client_support import PROJECT

from workqueue.gitlab import MergeRequestInfo, PermanentGitLabError
from workqueue.testing.gitlab_simulator import JobSpec

MR_ROUTE = "/projects/:id/merge_requests/:merge_request_iid"


def open_mr(client, branch="bot/bump", **options):
    client.commit(
        PROJECT,
        branch=branch,
        start_branch="main",
        message="Bump requests",
        actions=[{"action": "update", "file_path": "requirements.txt", "content": "x\n"}],
    )
    options.setdefault("title", "Bump requests")
    return client.create_merge_request(
        PROJECT,
        source_branch=branch,
        target_branch="main",
        description=options.pop("description", "Automated."),
        labels=options.pop("labels", ["deps", "bot"]),
        **options,
    )


def test_create_and_get(sim, client, project_id, calls):
    created = open_mr(client)
    assert created == MergeRequestInfo(
        iid=1,
        web_url=f"{sim.url}/{PROJECT}/-/merge_requests/1",
        state="opened",
        draft=False,
        sha=sim.branch_head(project_id, "bot/bump"),
        source_branch="bot/bump",
        target_branch="main",
        source_project_id=project_id,
        target_project_id=project_id,
        author_id=sim.bot.id,
        author_username=sim.bot.username,
        title="Bump requests",
        description="Automated.",
        labels=("bot", "deps"),
        detailed_merge_status=created.detailed_merge_status,
        head_pipeline_id=None,
        head_pipeline_sha=None,
        head_pipeline_status=None,
        merge_commit_sha=None,
        merge_error=None,
        closed_by_id=None,
        merge_status=created.merge_status,
    )
    assert sim.merge_request(project_id, 1)["force_remove_source_branch"] is True
    fetched = client.merge_request(PROJECT, 1)
    assert fetched.detailed_merge_status == "mergeable"
    assert fetched.iid == created.iid
    assert calls.calls[-2:] == [("merge_requests.create", 201), ("merge_requests.get", 200)]


def test_head_pipeline_fields(sim, client, project_id):
    mr = open_mr(client)
    pipeline_id = sim.create_pipeline(
        project_id, merge_request_iid=mr.iid, jobs=[JobSpec("test", status="running")]
    )
    fetched = client.merge_request(PROJECT, mr.iid)
    assert fetched.head_pipeline_id == pipeline_id
    assert fetched.head_pipeline_sha == mr.sha
    assert fetched.head_pipeline_status == "running"


def test_a_second_open_mr_for_the_branch_is_a_409_with_gitlabs_message(client):
    open_mr(client)
    with pytest.raises(PermanentGitLabError) as caught:
        client.create_merge_request(
            PROJECT, source_branch="bot/bump", target_branch="main", title="again"
        )
    assert caught.value.status == 409
    assert caught.value.message == (
        "Another open merge request already exists for this source branch: !1"
    )


def test_open_merge_requests_filters_by_branch_and_state(sim, client, project_id, calls):
    first = open_mr(client, "bot/a")
    open_mr(client, "bot/b")
    assert [mr.iid for mr in client.open_merge_requests(PROJECT, "bot/a")] == [first.iid]
    assert [mr.iid for mr in client.open_merge_requests(PROJECT, "bot/a", "main")] == [first.iid]
    assert client.open_merge_requests(PROJECT, "bot/a", "other") == []
    client.close_merge_request(PROJECT, first.iid)
    assert client.open_merge_requests(PROJECT, "bot/a") == []
    assert client.open_merge_requests(PROJECT, "bot/none") == []
    assert ("merge_requests.list", 200) in calls.calls


def test_open_merge_requests_follows_every_page(sim, client, project_id):
    sim.push(project_id, "feature", {"f.txt": "f\n"})
    for n in range(105):  # the simulator's helper skips GitLab's duplicate check
        sim.create_merge_request(project_id, "feature", f"t{n}")
    found = client.open_merge_requests(PROJECT, "feature")
    assert sorted(mr.iid for mr in found) == list(range(1, 106))
    records = sim.log.records("GET", "/projects/:id/merge_requests")
    assert len(records) == 2  # 100 per page
    assert records[0].query["per_page"] == "100"


def test_update_changes_only_the_given_fields(sim, client, project_id, calls):
    mr = open_mr(client)
    updated = client.update_merge_request(
        PROJECT, mr.iid, title="Draft: Bump requests", labels=["deps"]
    )
    assert updated.title == "Draft: Bump requests"
    assert updated.draft
    assert updated.labels == ("deps",)
    assert updated.description == "Automated."
    [record] = sim.log.records("PUT", MR_ROUTE)
    assert record.body == {"title": "Draft: Bump requests", "labels": "deps"}
    cleared = client.update_merge_request(PROJECT, mr.iid, labels=[], description="new")
    assert (cleared.labels, cleared.description) == ((), "new")
    assert calls.calls[-1] == ("merge_requests.update", 200)


def test_update_rejects_unknown_or_mistyped_fields_before_any_request(sim, client):
    with pytest.raises(ValueError, match="at least one"):
        client.update_merge_request(PROJECT, 1)
    with pytest.raises(TypeError, match="unknown field 'state_event'"):
        client.update_merge_request(PROJECT, 1, state_event="close")
    with pytest.raises(TypeError, match="bad value for 'labels'"):
        client.update_merge_request(PROJECT, 1, labels="a,b")
    with pytest.raises(TypeError, match="bad value for 'title'"):
        client.update_merge_request(PROJECT, 1, title=None)
    assert sim.request_count() == 0


def test_close_and_note(sim, client, project_id, calls):
    mr = open_mr(client)
    note_id = client.add_note(PROJECT, mr.iid, "Closing: empty diff.")
    assert isinstance(note_id, int)
    assert mr.closed_by_id is None
    closed = client.close_merge_request(PROJECT, mr.iid)
    assert (closed.state, closed.closed_by_id) == ("closed", sim.bot.id)
    bodies = [note["body"] for note in sim.notes(project_id, mr.iid) if not note["system"]]
    assert bodies == ["Closing: empty diff."]
    assert calls.calls[-2:] == [("notes.create", 201), ("merge_requests.close", 200)]


def test_merge_with_the_current_sha(sim, client, project_id, calls):
    mr = open_mr(client)
    merged = client.merge(PROJECT, mr.iid, sha=mr.sha)
    assert merged.state == "merged"
    assert merged.merge_commit_sha == sim.branch_head(project_id, "main")
    assert sim.branch_head(project_id, "bot/bump") is None  # remove_source_branch=True
    [record] = sim.log.records("PUT", f"{MR_ROUTE}/merge")
    assert record.body == {"sha": mr.sha}
    assert "merge_when_pipeline_succeeds" not in record.query
    assert calls.calls[-1] == ("merge_requests.merge", 200)


def test_merge_with_a_stale_sha_is_409(sim, client, project_id):
    mr = open_mr(client)
    with pytest.raises(PermanentGitLabError) as caught:
        client.merge(PROJECT, mr.iid, sha="0" * 40)
    assert caught.value.status == 409
    assert caught.value.message == f"SHA does not match HEAD of source branch: {mr.sha}"
    assert client.merge_request(PROJECT, mr.iid).state == "opened"


@pytest.mark.parametrize("blocker", ["draft", "closed", "pipeline"])
def test_merge_when_not_mergeable_is_405(sim, client, project_id, blocker):
    mr = open_mr(client)
    if blocker == "draft":
        client.update_merge_request(PROJECT, mr.iid, title="Draft: wip")
    elif blocker == "closed":
        client.close_merge_request(PROJECT, mr.iid)
    else:
        sim.configure_project(project_id, only_allow_merge_if_pipeline_succeeds=True)
        sim.create_pipeline(
            project_id, merge_request_iid=mr.iid, jobs=[JobSpec("t", status="running")]
        )
    with pytest.raises(PermanentGitLabError) as caught:
        client.merge(PROJECT, mr.iid, sha=mr.sha)
    assert (caught.value.status, caught.value.message) == (405, "405 Method Not Allowed")


def test_merge_with_conflicts_is_422(sim, client, project_id):
    mr = open_mr(client)
    sim.push(project_id, "main", {"requirements.txt": "conflicting\n"})
    with pytest.raises(PermanentGitLabError) as caught:
        client.merge(PROJECT, mr.iid, sha=mr.sha)
    assert (caught.value.status, caught.value.message) == (422, "Branch cannot be merged")


def test_missing_mr_is_404(client):
    with pytest.raises(PermanentGitLabError) as caught:
        client.merge_request(PROJECT, 99)
    assert (caught.value.status, caught.value.message) == (404, "404 Not found")
