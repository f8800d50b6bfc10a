"""Rebases in the background, merged-results pipelines, merge trains and refused merges."""

from __future__ import annotations

import gitlab
import pytest

SOURCE = "bot/bump-requests"
CONFLICTING = {"requirements.txt": "requests==2.30.0\nflask==3.0.0\nrich==13.7.0\n"}


def open_mr(project):
    return project.mergerequests.create(
        {"source_branch": SOURCE, "target_branch": "main", "title": "Bump requests"}
    )


def read(project, iid):
    return project.mergerequests.get(iid, include_rebase_in_progress=True)


# -- rebase ------------------------------------------------------------------------------


def test_a_rebase_runs_in_the_background_and_replays_the_commit_as_the_requester(
    sim, project_id, project, bot_branch
):
    sim.configure_project(project_id, merge_method="ff")
    mr = open_mr(project)
    person = sim.push(project_id, "main", {"README.md": "# moved\n"})
    assert read(project, mr.iid).detailed_merge_status == "need_rebase"

    assert mr.rebase() == {"rebase_in_progress": True}
    assert sim.rebase_in_progress(project_id, mr.iid)
    running = read(project, mr.iid)  # this read still sees it running
    assert (running.rebase_in_progress, running.sha) == (True, bot_branch["id"])
    done = read(project, mr.iid)
    assert done.rebase_in_progress is False
    assert done.detailed_merge_status == "mergeable"
    rebased = project.commits.get(done.sha)
    assert rebased.parent_ids == [person]
    assert rebased.message == bot_branch["message"]
    assert (rebased.author_email, rebased.committer_email) == (
        bot_branch["author_email"],
        "workqueue-bot@example.com",
    )
    assert sim.branch_head(project_id, SOURCE) == done.sha


def test_a_rebase_that_conflicts_leaves_the_branch_and_sets_merge_error(
    sim, project_id, project, bot_branch
):
    sim.configure_project(project_id, merge_method="ff")
    mr = open_mr(project)
    mr.rebase()
    sim.push(project_id, "main", CONFLICTING)  # lands while the rebase is queued
    sim.finish_rebase(project_id, mr.iid)
    after = read(project, mr.iid)
    assert after.rebase_in_progress is False
    assert after.merge_error == "Rebase failed. Please rebase locally"
    assert after.sha == bot_branch["id"]
    assert after.detailed_merge_status == "conflict"


def test_a_failed_rebase_can_be_injected_and_a_second_request_while_one_runs_is_409(
    sim, project_id, project, bot_branch
):
    sim.configure_project(project_id, merge_method="ff")
    mr = open_mr(project)
    sim.push(project_id, "main", {"README.md": "# moved\n"})
    sim.fail_next_rebase(project_id, mr.iid, "Rebase failed: Gitaly timed out")
    mr.rebase()
    with pytest.raises(gitlab.GitlabMRRebaseError) as second:
        mr.rebase()
    assert second.value.response_code == 409
    read(project, mr.iid)
    after = read(project, mr.iid)
    assert (after.rebase_in_progress, after.merge_error) == (
        False,
        "Rebase failed: Gitaly timed out",
    )
    assert after.sha == bot_branch["id"]
    assert after.detailed_merge_status == "need_rebase"


def test_rebase_reads_zero_rebases_at_once(sim, project_id, project, bot_branch):
    sim.state.rebase_reads = 0
    sim.configure_project(project_id, merge_method="ff")
    mr = open_mr(project)
    sim.push(project_id, "main", {"README.md": "# moved\n"})
    mr.rebase()
    assert read(project, mr.iid).detailed_merge_status == "mergeable"


# -- merged-results pipelines ------------------------------------------------------------


def test_a_merged_results_pipeline_runs_on_a_merge_commit_and_is_the_head_pipeline(
    sim, project_id, project, bot_branch
):
    mr = open_mr(project)
    target = sim.push(project_id, "main", {"README.md": "# moved\n"})
    pipeline_id = sim.create_pipeline(
        project_id, merge_request_iid=mr.iid, merged_results=True, status="success"
    )
    pipeline = project.pipelines.get(pipeline_id)
    assert pipeline.ref == f"refs/merge-requests/{mr.iid}/merge"
    assert pipeline.source == "merge_request_event"
    merge_commit = project.commits.get(pipeline.sha)
    assert merge_commit.parent_ids == [target, bot_branch["id"]]
    head = project.mergerequests.get(mr.iid).head_pipeline
    assert (head["id"], head["sha"], head["ref"]) == (pipeline_id, pipeline.sha, pipeline.ref)

    hook = sim.pipeline_hook(pipeline_id)
    # GitLab's `source_ref`: the hook names the source branch, the sha is the merge commit.
    assert hook["object_attributes"]["ref"] == SOURCE
    assert hook["object_attributes"]["sha"] == pipeline.sha
    assert hook["merge_request"]["iid"] == mr.iid
    assert hook["commit"]["id"] == pipeline.sha


def test_a_merged_results_pipeline_of_an_older_head_is_not_the_head_pipeline(
    sim, project_id, project, bot_branch
):
    mr = open_mr(project)
    sim.create_pipeline(project_id, merge_request_iid=mr.iid, merged_results=True, status="success")
    sim.push(project_id, SOURCE, {"extra.txt": "x\n"})
    assert project.mergerequests.get(mr.iid).head_pipeline is None


def test_a_merged_results_pipeline_needs_a_clean_merge(sim, project_id, project, bot_branch):
    mr = open_mr(project)
    sim.push(project_id, "main", CONFLICTING)
    with pytest.raises(ValueError, match="conflicts"):
        sim.create_pipeline(project_id, merge_request_iid=mr.iid, merged_results=True)


# -- merge trains ------------------------------------------------------------------------


@pytest.fixture
def trains(sim, project_id):
    sim.configure_merge_trains(project_id)
    sim.configure_project(project_id, only_allow_merge_if_pipeline_succeeds=True)


def green_mr(sim, project_id, project):
    mr = open_mr(project)
    sim.create_pipeline(project_id, merge_request_iid=mr.iid, merged_results=True, status="success")
    return mr


def test_projects_show_their_merge_train_settings(sim, project_id, project, trains):
    fresh = sim.create_project("acme/plain")
    plain = project.manager.gitlab.projects.get(fresh)
    assert (plain.merge_trains_enabled, plain.merge_pipelines_enabled) == (False, False)
    shown = project.manager.get(project_id)
    assert (shown.merge_trains_enabled, shown.merge_pipelines_enabled) == (True, True)
    assert shown.merge_trains_skip_train_allowed is False


def test_a_car_runs_a_train_pipeline_and_merges_when_it_passes(
    sim, api, project_id, project, bot_branch, trains
):
    mr = green_mr(sim, project_id, project)
    added = api.post(
        f"/projects/{project_id}/merge_trains/merge_requests/{mr.iid}",
        json={"sha": bot_branch["id"]},
    )
    assert added.status_code == 201
    [car] = added.json()
    assert (car["merge_request"]["iid"], car["status"], car["target_branch"]) == (
        mr.iid,
        "fresh",
        "main",
    )
    pipeline = car["pipeline"]
    assert pipeline["ref"] == f"refs/merge-requests/{mr.iid}/train"
    assert project.commits.get(pipeline["sha"]).parent_ids[1] == bot_branch["id"]
    assert project.mergerequests.get(mr.iid).merge_when_pipeline_succeeds is True

    sim.set_pipeline_status(pipeline["id"], "success")
    assert project.mergerequests.get(mr.iid).state == "merged"
    shown = api.get(f"/projects/{project_id}/merge_trains/merge_requests/{mr.iid}").json()
    assert (shown["status"], shown["merged_at"] is not None) == ("merged", True)
    complete = api.get(f"/projects/{project_id}/merge_trains", params={"scope": "complete"})
    assert [c["id"] for c in complete.json()] == [car["id"]]
    assert api.get(f"/projects/{project_id}/merge_trains/main?scope=active").json() == []


def test_a_car_whose_pipeline_fails_is_dropped_and_the_next_one_rebuilt(
    sim, api, project_id, project, bot_branch, trains
):
    first = green_mr(sim, project_id, project)
    sim.push(project_id, "bot/second", {"second.txt": "2\n"}, user="workqueue-bot")
    second = project.mergerequests.create(
        {"source_branch": "bot/second", "target_branch": "main", "title": "Second"}
    )
    sim.create_pipeline(
        project_id, merge_request_iid=second.iid, merged_results=True, status="success"
    )
    for mr in (first, second):
        api.post(f"/projects/{project_id}/merge_trains/merge_requests/{mr.iid}").raise_for_status()
    [car1, car2] = sim.merge_train(project_id, "main")
    assert project.commits.get(car2["pipeline"]["sha"]).parent_ids[0] == car1["pipeline"]["sha"]

    sim.set_pipeline_status(car1["pipeline"]["id"], "failed")
    gone = api.get(f"/projects/{project_id}/merge_trains/merge_requests/{first.iid}")
    assert (gone.status_code, gone.json()) == (
        404,
        {"message": "404 Merge Train Merge Request Not Found"},
    )
    dropped = project.mergerequests.get(first.iid)
    assert (dropped.state, dropped.merge_when_pipeline_succeeds) == ("opened", False)
    assert "because the pipeline did not succeed" in sim.notes(project_id, first.iid)[-1]["body"]
    [rebuilt] = sim.merge_train(project_id, "main")
    assert rebuilt["status"] == "fresh"
    assert rebuilt["pipeline"]["id"] != car2["pipeline"]["id"]
    assert project.commits.get(rebuilt["pipeline"]["sha"]).parent_ids[0] == sim.branch_head(
        project_id, "main"
    )


def test_new_commits_drop_a_car_and_a_merge_outside_the_train_skips_it(
    sim, api, project_id, project, bot_branch, trains
):
    mr = green_mr(sim, project_id, project)
    api.post(f"/projects/{project_id}/merge_trains/merge_requests/{mr.iid}").raise_for_status()
    sim.push(project_id, SOURCE, {"extra.txt": "x\n"})
    assert sim.train_car(project_id, mr.iid) is None

    sim.create_pipeline(project_id, merge_request_iid=mr.iid, merged_results=True, status="success")
    api.post(f"/projects/{project_id}/merge_trains/merge_requests/{mr.iid}").raise_for_status()
    sim.merge(project_id, mr.iid)
    car = sim.train_car(project_id, mr.iid)
    assert car is not None
    assert car["status"] == "skip_merged"


def test_adding_refuses_a_wrong_sha_an_unready_mr_and_a_project_without_trains(
    sim, api, project_id, project, bot_branch, trains
):
    mr = open_mr(project)
    route = f"/projects/{project_id}/merge_trains/merge_requests/{mr.iid}"
    wrong = api.post(route, json={"sha": "f" * 40})
    assert (wrong.status_code, wrong.json()["message"]) == (
        409,
        f"SHA does not match HEAD of source branch: {bot_branch['id']}",
    )
    unready = api.post(route, json={"sha": bot_branch["id"]})  # no pipeline yet
    assert (unready.status_code, unready.json()) == (
        400,
        {"message": "400 Bad request - Failed to merge"},
    )
    sim.configure_merge_trains(project_id, enabled=False)
    assert api.post(route).status_code == 403
    assert api.get(f"/projects/{project_id}/merge_trains").status_code == 403


def test_merging_at_once_skips_the_train_only_when_the_project_allows_it(
    sim, project_id, project, bot_branch, trains
):
    mr = green_mr(sim, project_id, project)
    with pytest.raises(gitlab.GitlabMRClosedError) as refused:
        mr.merge(sha=bot_branch["id"])
    assert refused.value.response_code == 405
    sim.configure_merge_trains(project_id, skip_train_allowed=True)
    mr.merge(sha=bot_branch["id"])
    assert project.mergerequests.get(mr.iid).state == "merged"


# -- refusals ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "message"),
    [
        (405, "405 Method Not Allowed"),
        (406, "Branch cannot be merged"),
        (422, "Branch cannot be merged"),
    ],
)
def test_refused_merges_answer_gitlabs_status_and_message(
    sim, project_id, project, bot_branch, status, message
):
    mr = open_mr(project)
    sim.refuse_merges(status, times=1)
    with pytest.raises(gitlab.GitlabMRClosedError) as refused:
        mr.merge(sha=bot_branch["id"])
    assert (refused.value.response_code, refused.value.error_message) == (status, message)
    mr.merge(sha=bot_branch["id"])  # only the next one was refused
    assert project.mergerequests.get(mr.iid).state == "merged"


def test_refusals_can_name_a_reason_and_hit_the_train_route(
    sim, api, project_id, project, bot_branch, trains
):
    sim.refuse_merges(405, "merge request is blocked by !3", times=1)
    mr = green_mr(sim, project_id, project)
    answer = api.put(f"/projects/{project_id}/merge_requests/{mr.iid}/merge")
    assert answer.json() == {"message": "merge request is blocked by !3"}
    sim.refuse_merges(400, train=True)
    refused = api.post(f"/projects/{project_id}/merge_trains/merge_requests/{mr.iid}")
    assert (refused.status_code, refused.json()) == (
        400,
        {"message": "400 Bad request - Failed to merge"},
    )
    assert sim.train_car(project_id, mr.iid) is None


def test_a_train_pipeline_runs_until_told_and_a_canceled_one_drops_the_car(
    sim, api, project_id, project, bot_branch, trains
):
    mr = green_mr(sim, project_id, project)
    api.post(f"/projects/{project_id}/merge_trains/merge_requests/{mr.iid}").raise_for_status()
    pipeline_id = sim.train_car(project_id, mr.iid)["pipeline"]["id"]
    assert sim.pipeline(pipeline_id)["status"] == "running"
    sim.set_pipeline_status(pipeline_id, "canceled")
    assert sim.train_car(project_id, mr.iid) is None
