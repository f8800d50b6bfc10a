"""Rebases, merge trains, merged-results pipelines and commits through `GitLabClient`."""

from __future__ import annotations

import pytest
from gitlab_client_support import PROJECT
from test_gitlab_client_merge_requests import open_mr

from workqueue.gitlab import MergeTrainCarInfo, PermanentGitLabError


def test_a_rebase_is_asked_for_and_its_progress_read(sim, client, project_id, calls):
    sim.configure_project(project_id, merge_method="ff")
    mr = open_mr(client)
    assert client.merge_request(PROJECT, mr.iid).rebase_in_progress is None  # not asked
    target = sim.push(project_id, "main", {"README.md": "moved\n"})
    before = client.merge_request(PROJECT, mr.iid, include_diverged_commits_count=True)
    assert (before.detailed_merge_status, before.diverged_commits_count) == ("need_rebase", 1)

    assert client.rebase_merge_request(PROJECT, mr.iid) is True
    assert calls.calls[-1] == ("merge_requests.rebase", 202)
    running = client.merge_request(PROJECT, mr.iid, include_rebase_in_progress=True)
    assert (running.rebase_in_progress, running.sha) == (True, mr.sha)
    done = client.merge_request(PROJECT, mr.iid, include_rebase_in_progress=True)
    assert done.rebase_in_progress is False
    assert done.sha != mr.sha
    rebased = client.get_commit(PROJECT, done.sha)
    assert rebased.parent_ids == (target,)
    assert calls.calls[-1] == ("commits.get", 200)


def test_a_second_rebase_while_one_runs_is_a_409(sim, client, project_id):
    mr = open_mr(client)
    client.rebase_merge_request(PROJECT, mr.iid)
    with pytest.raises(PermanentGitLabError) as refused:
        client.rebase_merge_request(PROJECT, mr.iid)
    assert refused.value.status == 409


def test_projects_show_their_merge_method_and_merge_trains(sim, client, project_id):
    info = client.project(PROJECT)
    assert (info.merge_method, info.merge_trains_enabled) == ("merge", False)
    sim.configure_merge_trains(project_id)
    sim.configure_project(project_id, merge_method="rebase_merge")
    fresh = client.project(project_id)  # another cache key: read anew
    assert (fresh.merge_method, fresh.merge_trains_enabled) == ("rebase_merge", True)


def test_a_merged_results_head_pipeline_shows_its_ref(sim, client, project_id):
    mr = open_mr(client)
    sim.create_pipeline(project_id, merge_request_iid=mr.iid, merged_results=True)
    read = client.merge_request(PROJECT, mr.iid)
    assert read.head_pipeline_ref == f"refs/merge-requests/{mr.iid}/merge"
    assert read.head_pipeline_sha != mr.sha
    merge_commit = client.get_commit(PROJECT, read.head_pipeline_sha)
    assert merge_commit.parent_ids[1] == mr.sha


def test_merge_trains_add_read_and_drop(sim, client, project_id, calls):
    sim.configure_merge_trains(project_id)
    mr = open_mr(client)
    assert client.merge_train_car(PROJECT, mr.iid) is None
    sim.create_pipeline(project_id, merge_request_iid=mr.iid, merged_results=True, status="success")

    client.add_to_merge_train(PROJECT, mr.iid, sha=mr.sha)
    assert calls.calls[-1] == ("merge_trains.add", 201)
    car = client.merge_train_car(PROJECT, mr.iid)
    assert isinstance(car, MergeTrainCarInfo)
    assert (car.iid, car.status, car.target_branch) == (mr.iid, "fresh", "main")
    assert car.pipeline_id is not None
    sim.set_pipeline_status(car.pipeline_id, "failed")
    assert client.merge_train_car(PROJECT, mr.iid) is None  # dropped


@pytest.mark.parametrize(
    ("ready", "sha", "status"),
    [(True, "f" * 40, 409), (False, None, 400)],
    ids=["sha-mismatch", "not-mergeable"],
)
def test_merge_train_refusals_are_permanent_errors_with_their_status(
    sim, client, project_id, ready, sha, status
):
    sim.configure_merge_trains(project_id)
    mr = open_mr(client)
    if ready:
        sim.create_pipeline(project_id, merge_request_iid=mr.iid, status="success")
    with pytest.raises(PermanentGitLabError) as refused:
        client.add_to_merge_train(PROJECT, mr.iid, sha=sha or mr.sha)
    assert refused.value.status == status


def test_a_project_without_trains_answers_403_to_train_reads(sim, client, project_id):
    mr = open_mr(client)
    with pytest.raises(PermanentGitLabError) as refused:
        client.merge_train_car(PROJECT, mr.iid)
    assert refused.value.status == 403
