"""Table tests of the rules that keep trunk heads on their branch: where a sha stands,
the per-queue backoff of push reads, and which queue a Push Hook hints at."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from workqueue.types.trunk.branch_heads import (
    Backoff,
    BranchPlace,
    Place,
    place_on_branch,
)
from workqueue.types.trunk.config import TrunkTypeConfig
from workqueue.types.trunk.landed_heads import hinted_queue, kept_queue

SHA, HEAD, OTHER = "a" * 40, "b" * 40, "c" * 40
ZERO = "0" * 40


@pytest.mark.parametrize(
    ("head", "merge_base", "expected"),
    [
        (SHA, None, Place.HEAD),  # the head itself: no merge base asked
        (HEAD, SHA, Place.ANCESTOR),  # newer commits landed on top of it
        (HEAD, OTHER, Place.OFF_BRANCH),  # a force-push left it behind
        (HEAD, None, Place.OFF_BRANCH),  # GitLab knows no common history, or not the sha
        (None, None, Place.BRANCH_GONE),  # the branch was deleted
        (None, SHA, Place.BRANCH_GONE),  # no branch wins over any merge base
    ],
)
def test_place_on_branch(head, merge_base, expected):
    assert place_on_branch(SHA, head, merge_base) is expected


@pytest.mark.parametrize(
    ("place", "on_branch"),
    [
        (Place.HEAD, True),
        (Place.ANCESTOR, True),
        (Place.OFF_BRANCH, False),
        (Place.BRANCH_GONE, False),
    ],
)
def test_only_the_head_and_its_ancestors_are_on_the_branch(place, on_branch):
    assert place.on_branch is on_branch


@pytest.mark.parametrize(
    ("place", "expected"),
    [
        (BranchPlace(Place.OFF_BRANCH, HEAD), f"{SHA} is no longer on main: its head {HEAD}"),
        (BranchPlace(Place.BRANCH_GONE, None), f"{SHA} is no longer on main: the branch does not"),
        (BranchPlace(Place.ANCESTOR, HEAD), f"{SHA} is on main (head {HEAD})"),
    ],
)
def test_a_place_says_what_it_is(place, expected):
    assert place.describe(SHA, "main").startswith(expected)


def test_backoff_doubles_per_key_up_to_its_maximum_and_a_success_forgets():
    backoff = Backoff(initial=1.0, maximum=4.0)
    assert backoff.ready("q", 0.0)
    delays = [backoff.failed("q", now) for now in (0.0, 1.0, 3.0, 7.0, 11.0)]
    assert delays == [1.0, 2.0, 4.0, 4.0, 4.0]
    assert not backoff.ready("q", 14.9)
    assert backoff.ready("q", 15.0)
    assert backoff.ready("other", 11.0)  # keys are left alone one by one
    backoff.succeeded("q")
    assert backoff.ready("q", 11.0)
    assert backoff.failed("q", 11.0) == 1.0  # a new outage starts short again


CONFIG = TrunkTypeConfig.model_validate(
    {
        "gitlab_url": "https://gitlab.example.com",
        "queues": [
            {"project": "group/app", "branch": "main"},
            {"project": "group/lib", "branch": "release"},
        ],
    }
)
PUSH: dict[str, Any] = {
    "object_kind": "push",
    "ref": "refs/heads/main",
    "before": OTHER,
    "after": SHA,
    "checkout_sha": SHA,
    "project_id": 7,
    "project": {"id": 7, "path_with_namespace": "group/app"},
    "commits": [],
}


def push(**changes: Any) -> dict[str, Any]:
    body = copy.deepcopy(PUSH)
    body.update(changes)
    return body


@pytest.mark.parametrize(
    ("body", "queue"),
    [
        (PUSH, "group/app:main"),
        # `after` only says the branch moved: any sha (even a foreign one) names the queue
        (push(after=HEAD, checkout_sha=HEAD), "group/app:main"),
        (
            push(ref="refs/heads/release", project={"id": 8, "path_with_namespace": "group/lib"}),
            "group/lib:release",
        ),
        (push(after=ZERO, checkout_sha=None), None),  # the branch was deleted
        (push(ref="refs/tags/v1"), None),
        (push(ref="refs/heads/develop"), None),  # not a configured branch
        (push(ref="refs/heads/release"), None),  # a configured branch of another project
        (push(project={"id": 9, "path_with_namespace": "other/app"}, project_id=9), None),
        (push(project={"id": 7, "path_with_namespace": "Group/App"}, project_id=None), None),
        (push(object_kind="merge_request"), None),
        (push(ref=None), None),
        (push(after=None), None),
        ({}, None),
    ],
)
def test_hinted_queue(body, queue):
    found = hinted_queue(CONFIG, body)
    assert (None if found is None else found.name) == queue


@pytest.mark.parametrize(
    ("body", "queue"),
    [
        ({"queue": "group/app:main"}, "group/app:main"),
        ({"queue": "group/app:develop"}, None),  # no longer (or never) configured
        ({"queue": 7}, None),
        ({}, None),
    ],
)
def test_kept_queue(body, queue):
    found = kept_queue(CONFIG, body)
    assert (None if found is None else found.name) == queue
