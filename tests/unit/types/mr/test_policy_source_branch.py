"""`source_branch_prefix` and branch relations in the `mr` policy: a table of cases."""

from __future__ import annotations

import pytest

from workqueue.types.mr.config import MRTypeConfig
from workqueue.types.mr.schemas import MRWorkItemCreate
from workqueue.types.mr.validation.policy import check_submission

DEFAULT = MRTypeConfig()
SOURCE = ("body", "source_branch")


def _check(config: MRTypeConfig = DEFAULT, **overrides: object) -> list[tuple]:
    body: dict[str, object] = {
        "project": "group/project",
        "source_branch": "workqueue/sync",
        "title": "Sync",
        "commit_message": "Sync sources",
        "file_actions": [{"action": "delete", "file_path": "a"}],
        **overrides,
    }
    submission = MRWorkItemCreate.model_validate(body)
    return [(v.loc, v.kind) for v in check_submission(submission, config)]


PREFIX_CASES = [
    # (source_branch, accepted with the default prefix "workqueue/")
    ("workqueue/sync-kernel", True),
    ("workqueue/a/b/c", True),
    ("workqueue/x", True),
    ("workqueue/", False),  # invalid anyway (trailing '/'), reported once
    ("workqueue", False),
    ("main", False),
    ("bot/sync-kernel", False),
    ("Workqueue/x", False),  # refs are case-sensitive
    ("WORKQUEUE/x", False),
    ("workqueuex/y", False),
    ("xworkqueue/y", False),
    ("feature/workqueue/x", False),
    ("workqueue-x", False),
]


@pytest.mark.parametrize(("branch", "accepted"), PREFIX_CASES)
def test_source_branch_must_be_below_the_prefix(branch, accepted):
    found = _check(source_branch=branch)
    if accepted:
        assert found == []
    else:
        assert len(found) == 1
        assert found[0][0] == SOURCE
        assert found[0][1] in {"branch_outside_prefix", "invalid_branch"}


def test_outside_the_prefix_is_its_own_kind_with_a_message_naming_the_prefix():
    submission = MRWorkItemCreate.model_validate(
        {
            "project": "group/project",
            "source_branch": "release",
            "title": "t",
            "commit_message": "m",
            "file_actions": [{"action": "delete", "file_path": "a"}],
        }
    )
    (violation,) = check_submission(submission, DEFAULT)
    assert (violation.loc, violation.kind) == (SOURCE, "branch_outside_prefix")
    assert "'workqueue/'" in violation.message


@pytest.mark.parametrize(
    ("prefix", "branch", "accepted"),
    [
        ("bots/", "bots/x", True),
        ("bots/", "workqueue/x", False),
        ("sync-", "sync-kernel", True),
        ("sync-", "sync-", False),  # nothing of its own below the prefix
        ("", "main-ish", True),  # the explicit opt-out
        ("", "anything/at/all", True),
    ],
)
def test_configured_prefix(prefix, branch, accepted):
    config = MRTypeConfig(source_branch_prefix=prefix)
    assert (_check(config, source_branch=branch) == []) is accepted


def test_target_branch_is_not_bound_by_the_prefix():
    assert _check(target_branch="release/2.0") == []


def test_an_invalid_branch_reports_the_name_problem_not_the_prefix():
    assert _check(source_branch="workqueue/a..b") == [(SOURCE, "invalid_branch")]


@pytest.mark.parametrize(
    ("source", "target", "expected"),
    [
        ("workqueue/x", "workqueue/x", [(SOURCE, "same_branch")]),
        ("workqueue/x", "main", []),
        ("workqueue/x", "workqueue/y", [(("body", "target_branch"), "target_not_allowed")]),
        ("workqueue/x", None, []),  # checked at execution against the default branch
    ],
)
def test_source_must_differ_from_a_given_target(source, target, expected):
    assert _check(source_branch=source, target_branch=target) == expected
