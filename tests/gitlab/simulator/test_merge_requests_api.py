"""Merge requests through python-gitlab: lifecycle, errors, mergeability and merging."""

from __future__ import annotations

import gitlab
import pytest

from workqueue.testing.gitlab_simulator import JobSpec

SOURCE = "bot/bump-requests"


def open_mr(project, **extra):
    return project.mergerequests.create(
        {"source_branch": SOURCE, "target_branch": "main", "title": "Bump requests", **extra}
    )


def test_create_get_list_and_fields(sim, project, bot_branch):
    created = open_mr(
        project, description="Automated.", labels=["deps", "bot"], remove_source_branch=True
    )

    assert created.iid == 1
    assert created.id != created.iid
    assert created.state == "opened"
    assert created.web_url == f"{sim.url}/acme/platform/widgets/-/merge_requests/1"
    assert created.labels == ["bot", "deps"]
    assert created.sha == bot_branch["id"]
    assert created.force_remove_source_branch is True
    # Right after creation GitLab has not prepared the diff yet.
    assert created.detailed_merge_status == "preparing"
    assert created.diff_refs is None

    fetched = project.mergerequests.get(created.iid)
    assert fetched.detailed_merge_status == "mergeable"
    assert fetched.merge_status == "can_be_merged"
    assert fetched.draft is False
    assert fetched.head_pipeline is None
    assert fetched.changes_count == "1"
    assert fetched.diff_refs["head_sha"] == bot_branch["id"]

    listed = project.mergerequests.list(source_branch=SOURCE, state="opened", get_all=True)
    assert [mr.iid for mr in listed] == [1]
    assert project.mergerequests.list(source_branch="other", get_all=True) == []
    assert [mr.iid for mr in project.mergerequests.list(labels="deps,bot", get_all=True)] == [1]
    assert project.mergerequests.list(state="merged", get_all=True) == []


def test_create_errors_have_gitlabs_shapes(project, bot_branch):
    open_mr(project)
    with pytest.raises(gitlab.GitlabCreateError) as duplicate:
        open_mr(project)
    assert duplicate.value.response_code == 409
    assert duplicate.value.error_message == [
        "Another open merge request already exists for this source branch: !1"
    ]

    with pytest.raises(gitlab.GitlabCreateError) as same:
        project.mergerequests.create(
            {"source_branch": "main", "target_branch": "main", "title": "t"}
        )
    assert same.value.response_code == 422
    assert same.value.error_message == ["You can't use same project/branch for source and target"]

    with pytest.raises(gitlab.GitlabCreateError) as missing:
        project.mergerequests.create(
            {"source_branch": "nope", "target_branch": "main", "title": "t"}
        )
    assert (missing.value.response_code, missing.value.error_message) == (
        400,
        {"source_branch": ["does not exist"]},
    )


def test_missing_params_use_grape_error_shape(gl, project_id, bot_branch):
    with pytest.raises(gitlab.GitlabHttpError) as caught:
        gl.http_post(f"/projects/{project_id}/merge_requests", post_data={"title": "t"})
    assert caught.value.response_code == 400
    assert caught.value.error_message == "source_branch is missing, target_branch is missing"


def test_update_title_labels_and_close_reopen(project, bot_branch):
    mr = open_mr(project, labels=["deps"])
    updated = project.mergerequests.update(mr.iid, {"title": "Draft: Bump", "add_labels": "x,y"})
    assert updated["draft"] is True
    assert updated["labels"] == ["deps", "x", "y"]

    mr = project.mergerequests.get(mr.iid)
    assert mr.detailed_merge_status == "draft_status"
    mr.labels = ["only"]
    mr.description = "new text"
    mr.save()
    mr = project.mergerequests.get(mr.iid)
    assert (mr.labels, mr.description) == (["only"], "new text")

    mr.state_event = "close"
    mr.save()
    assert project.mergerequests.get(mr.iid).state == "closed"
    assert project.mergerequests.get(mr.iid).detailed_merge_status == "not_open"
    # Closed MRs no longer block a new one for the same branches.
    second = open_mr(project)
    with pytest.raises(gitlab.GitlabUpdateError) as reopen:
        project.mergerequests.update(mr.iid, {"state_event": "reopen"})
    assert reopen.value.response_code == 409
    assert second.iid == 2

    with pytest.raises(gitlab.GitlabUpdateError) as invalid:
        project.mergerequests.update(mr.iid, {"state_event": "merge"})
    assert invalid.value.error_message == "state_event does not have a valid value"


def test_merge_with_wrong_sha_is_409_and_changes_nothing(sim, project_id, project, bot_branch):
    mr = project.mergerequests.get(open_mr(project).iid)
    main_before = sim.branch_head(project_id, "main")

    with pytest.raises(gitlab.GitlabMRClosedError) as caught:
        mr.merge(sha="f" * 40)

    assert caught.value.response_code == 409
    assert caught.value.error_message == f"SHA does not match HEAD of source branch: {mr.sha}"
    assert sim.branch_head(project_id, "main") == main_before
    # python-gitlab sent sha in the query string; the simulator read it from there.
    assert sim.log.records(method="PUT")[-1].query == {"sha": "f" * 40}


def test_not_mergeable_is_405(sim, project_id, project, bot_branch):
    sim.configure_project(project_id, only_allow_merge_if_pipeline_succeeds=True)
    mr = project.mergerequests.get(open_mr(project).iid)
    assert mr.detailed_merge_status == "ci_must_pass"

    with pytest.raises(gitlab.GitlabMRClosedError) as caught:
        mr.merge(sha=mr.sha)
    assert (caught.value.response_code, caught.value.error_message) == (
        405,
        "405 Method Not Allowed",
    )
    # A failing state check wins over a wrong sha, as in GitLab's merge endpoint.
    with pytest.raises(gitlab.GitlabMRClosedError) as wrong_sha:
        mr.merge(sha="f" * 40)
    assert wrong_sha.value.response_code == 405


def test_successful_merge_updates_the_target_and_removes_the_source(
    sim, project_id, project, bot_branch
):
    mr = project.mergerequests.get(open_mr(project, remove_source_branch=True).iid)
    main_before = sim.branch_head(project_id, "main")

    mr.merge(sha=mr.sha)

    assert mr.state == "merged"
    merged_head = sim.branch_head(project_id, "main")
    assert merged_head == mr.merge_commit_sha
    [merge_commit] = sim.log_commits(project_id, "main", exclude=main_before)[:1]
    assert merge_commit.parent_ids == (main_before, bot_branch["id"])
    assert merge_commit.message.startswith("Merge branch 'bot/bump-requests' into 'main'")
    assert sim.read_file(project_id, "main", "requirements.txt").startswith(b"requests==2.32.3")
    assert sim.branch_head(project_id, SOURCE) is None
    assert project.mergerequests.get(mr.iid).detailed_merge_status == "not_open"
    with pytest.raises(gitlab.GitlabMRClosedError) as again:
        mr.merge()
    assert again.value.response_code == 405


def test_merge_combines_edits_of_the_same_file_when_git_would(sim, project_id, project, bot_branch):
    iid = open_mr(project).iid
    # Main edits line 2, right next to the MR's line 1: git calls adjacent edits a conflict.
    sim.push(
        project_id, "main", {"requirements.txt": "requests==2.31.0\nflask==3.1.0\nrich==13.7.0\n"}
    )
    assert project.mergerequests.get(iid).detailed_merge_status == "conflict"

    # Main instead edits line 3: one untouched line apart, the merge is clean.
    sim.push(
        project_id, "main", {"requirements.txt": "requests==2.31.0\nflask==3.0.0\nrich==13.8.0\n"}
    )
    mr = project.mergerequests.get(iid)
    assert mr.detailed_merge_status == "mergeable"
    mr.merge()
    assert sim.read_file(project_id, "main", "requirements.txt") == (
        b"requests==2.32.3\nflask==3.0.0\nrich==13.8.0\n"
    )


def test_conflict_is_reported_and_merge_is_422(sim, project_id, project, bot_branch):
    mr = open_mr(project)
    sim.push(
        project_id, "main", {"requirements.txt": "requests==2.30.0\nflask==3.0.0\nrich==13.7.0\n"}
    )
    mr = project.mergerequests.get(mr.iid)
    assert mr.detailed_merge_status == "conflict"
    assert mr.has_conflicts is True
    with pytest.raises(gitlab.GitlabMRClosedError) as caught:
        mr.merge()
    assert (caught.value.response_code, caught.value.error_message) == (
        422,
        "Branch cannot be merged",
    )


def test_fast_forward_projects_need_rebase_and_rebase_fixes_it(
    sim, project_id, project, bot_branch
):
    sim.configure_project(project_id, merge_method="ff")
    mr = open_mr(project)
    sim.push(project_id, "main", {"README.md": "# moved\n"})
    mr = project.mergerequests.get(mr.iid)
    assert mr.detailed_merge_status == "need_rebase"

    assert mr.rebase() == {"rebase_in_progress": True}
    # GitLab rebases in the background: the first read still shows it running.
    assert project.mergerequests.get(mr.iid, include_rebase_in_progress=True).rebase_in_progress
    mr = project.mergerequests.get(mr.iid, include_rebase_in_progress=True)
    assert mr.rebase_in_progress is False
    assert mr.detailed_merge_status == "mergeable"
    mr.merge(sha=mr.sha)
    assert sim.branch_head(project_id, "main") == mr.sha
    assert mr.merge_commit_sha is None


def test_pipeline_and_approval_requirements(sim, project_id, project, bot_branch):
    sim.configure_project(
        project_id, only_allow_merge_if_pipeline_succeeds=True, approvals_required=1
    )
    iid = open_mr(project).iid
    pipeline_id = sim.create_pipeline(
        project_id, merge_request_iid=iid, jobs=[JobSpec("unit-tests", status="running")]
    )
    mr = project.mergerequests.get(iid)
    assert mr.head_pipeline["id"] == pipeline_id
    assert mr.head_pipeline["ref"] == f"refs/merge-requests/{iid}/head"
    assert mr.detailed_merge_status == "ci_still_running"

    [job] = sim.jobs(pipeline_id)
    sim.set_job_status(job["id"], "success")
    assert project.mergerequests.get(iid).detailed_merge_status == "not_approved"
    # The bot authored it: no self-approval. GitLab answers 401, which python-gitlab
    # raises as GitlabAuthenticationError even from approve().
    with pytest.raises(gitlab.GitlabAuthenticationError):
        project.mergerequests.get(iid).approve()

    sim.approve(project_id, iid)
    approvals = project.mergerequests.get(iid).approvals.get()
    assert approvals.approved is True
    assert approvals.approved_by[0]["user"]["username"] == "ada"
    assert project.mergerequests.get(iid).detailed_merge_status == "mergeable"

    # A new push resets approvals and leaves the MR without a pipeline for its new head.
    sim.push(project_id, SOURCE, {"README.md": "more\n"})
    mr = project.mergerequests.get(iid)
    assert mr.sha == sim.branch_head(project_id, SOURCE)
    assert mr.head_pipeline is None
    assert mr.detailed_merge_status == "ci_must_pass"


def test_auto_merge_waits_for_the_pipeline(sim, project_id, project, bot_branch):
    iid = open_mr(project).iid
    pipeline_id = sim.create_pipeline(
        project_id, merge_request_iid=iid, jobs=[JobSpec("test", status="running")]
    )
    mr = project.mergerequests.get(iid)

    mr.merge(merge_when_pipeline_succeeds=True, sha=mr.sha)
    assert mr.state == "opened"
    assert mr.merge_when_pipeline_succeeds is True

    sim.set_pipeline_status(pipeline_id, "success")
    assert project.mergerequests.get(iid).state == "merged"


def test_draft_and_empty_mrs_are_not_mergeable(sim, project_id, project):
    project.branches.create({"branch": SOURCE, "ref": "main"})
    mr = open_mr(project)
    assert project.mergerequests.get(mr.iid).detailed_merge_status == "commits_status"
    project.mergerequests.update(mr.iid, {"title": "Draft: nothing"})
    assert project.mergerequests.get(mr.iid).detailed_merge_status == "draft_status"


def test_notes_create_and_list(sim, project, bot_branch):
    iid = open_mr(project).iid
    mr = project.mergerequests.get(iid)
    note = mr.notes.create({"body": "Closing: empty diff."})
    assert note.body == "Closing: empty diff."
    assert note.author["username"] == "workqueue-bot"
    assert note.noteable_iid == iid
    sim.add_note(project.id, iid, "@workqueue-bot retry please")

    bodies = [n.body for n in mr.notes.list(get_all=True, sort="asc")]
    assert bodies == ["Closing: empty diff.", "@workqueue-bot retry please"]
    with pytest.raises(gitlab.GitlabCreateError) as caught:
        mr.notes.create({"body": ""})
    assert caught.value.response_code == 400


def test_mr_changes_and_checking_state(sim, project_id, bot_branch, gl):
    sim.state.checking_reads = 1
    project = gl.projects.get(project_id)
    iid = open_mr(project).iid
    assert project.mergerequests.get(iid).detailed_merge_status == "checking"
    assert project.mergerequests.get(iid).detailed_merge_status == "mergeable"
    changes = project.mergerequests.get(iid).changes()
    assert [c["new_path"] for c in changes["changes"]] == ["requirements.txt"]


def test_missing_mr_is_404_not_found(project):
    with pytest.raises(gitlab.GitlabGetError) as caught:
        project.mergerequests.get(99)
    assert (caught.value.response_code, caught.value.error_message) == (404, "404 Not found")


def test_another_mr_landing_on_the_target_can_conflict_with_ours(
    sim, project_id, project, bot_branch
):
    iid = open_mr(project).iid
    sim.push(
        project_id,
        "human/pin",
        {"requirements.txt": "requests==2.30.0\nflask==3.0.0\nrich==13.7.0\n"},
        start_branch="main",
    )
    human_iid = sim.create_merge_request(project_id, "human/pin", "Pin requests")
    sim.merge(project_id, human_iid)

    assert sim.merge_request(project_id, human_iid)["state"] == "merged"
    assert project.mergerequests.get(iid).detailed_merge_status == "conflict"
    listed = project.mergerequests.list(get_all=True)
    assert [mr.iid for mr in listed] == [human_iid, iid]  # created_at desc by default
