"""Merge-train cars, rebase answers and merged-results head pipelines in the shapes real
GitLab gives (written for these tests after cars other projects captured: an `idle` car
of GitLab 15.6 with a push pipeline and a null description, a `merged` car of a train
pipeline on `refs/merge-requests/<iid>/train`)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from workqueue.gitlab.errors import ResponseShapeError
from workqueue.gitlab.models import (
    MergeTrainCarInfo,
    parse_merge_request,
    parse_merge_train_car,
    parse_project,
    parse_rebase,
)

USER = {"id": 7, "username": "robot", "name": "A Robot", "state": "active", "web_url": "u"}
IDLE_CAR: dict[str, Any] = {
    "id": 301,
    "merge_request": {
        "id": 410,
        "iid": 2,
        "project_id": 55,
        "title": "Bump",
        "description": None,
        "state": "opened",
        "created_at": "2022-10-31T19:06:05.725Z",
        "updated_at": "2022-10-31T19:06:05.725Z",
        "web_url": "http://gitlab.shapes.example/g/p/-/merge_requests/2",
    },
    "user": USER,
    "pipeline": {
        "id": 9001,
        "iid": 1,
        "project_id": 55,
        "sha": "a" * 40,
        "ref": "main",
        "status": "pending",
        "source": "push",
        "created_at": "2022-10-31T19:06:06.231Z",
        "updated_at": "2022-10-31T19:06:06.231Z",
        "web_url": "http://gitlab.shapes.example/g/p/-/pipelines/9001",
    },
    "created_at": "2022-10-31T19:06:06.237Z",
    "updated_at": "2022-10-31T19:06:06.237Z",
    "target_branch": "main",
    "status": "idle",
    "merged_at": None,
    "duration": None,
}


def merged_car() -> dict[str, Any]:
    car = copy.deepcopy(IDLE_CAR)
    car["merge_request"]["state"] = "merged"
    car["pipeline"].update(ref="refs/merge-requests/2/train", status="success", sha="b" * 40)
    car.update(status="merged", merged_at="2021-12-15T19:26:46.991Z", duration=2626)
    return car


def test_cars_of_both_captured_shapes_are_read():
    assert parse_merge_train_car(IDLE_CAR) == MergeTrainCarInfo(
        id=301, iid=2, status="idle", target_branch="main", pipeline_id=9001, pipeline_sha="a" * 40
    )
    merged = parse_merge_train_car(merged_car())
    assert (merged.status, merged.pipeline_sha) == ("merged", "b" * 40)
    bare = {**IDLE_CAR, "pipeline": None}  # a car whose train pipeline is not created yet
    assert parse_merge_train_car(bare).pipeline_id is None


@pytest.mark.parametrize("broken", [{"merge_request": None}, {"status": 3}, {"id": "301"}])
def test_a_car_of_another_shape_is_a_shape_error(broken):
    with pytest.raises(ResponseShapeError):
        parse_merge_train_car({**IDLE_CAR, **broken})


def test_rebase_answers_and_their_progress():
    assert parse_rebase({"rebase_in_progress": True}) is True
    with pytest.raises(ResponseShapeError):
        parse_rebase([])
    mr = {
        "iid": 2,
        "web_url": "w",
        "state": "opened",
        "source_branch": "bot/x",
        "target_branch": "main",
        "source_project_id": 55,
        "target_project_id": 55,
        "author": USER,
        "title": "Bump",
        "labels": [],
        "head_pipeline": {"id": 9, "sha": "c" * 40, "ref": "refs/merge-requests/2/merge"},
    }
    read = parse_merge_request({**mr, "rebase_in_progress": False, "diverged_commits_count": 3})
    assert (read.rebase_in_progress, read.diverged_commits_count) == (False, 3)
    assert read.head_pipeline_ref == "refs/merge-requests/2/merge"
    plain = parse_merge_request(mr)
    assert (plain.rebase_in_progress, plain.diverged_commits_count) == (None, None)
    with pytest.raises(ResponseShapeError):
        parse_merge_request({**mr, "rebase_in_progress": "yes"})


def test_projects_without_premium_settings_read_as_no_trains():
    base = {"id": 55, "path_with_namespace": "g/p", "default_branch": "main", "web_url": "w"}
    assert (parse_project(base).merge_method, parse_project(base).merge_trains_enabled) == (
        None,
        False,
    )
    premium = parse_project({**base, "merge_method": "ff", "merge_trains_enabled": True})
    assert (premium.merge_method, premium.merge_trains_enabled) == ("ff", True)
