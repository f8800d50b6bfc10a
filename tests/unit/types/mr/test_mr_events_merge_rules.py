"""When reconcile_mr merges, and when it waits (and whether for an event or a deferral)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from workqueue.gitlab.models import MergeRequestInfo
from workqueue.types.mr.executors.merge_blockers import BlockerCode, merge_blocker
from workqueue.types.mr.models import MRWorkItem

HEAD, OLD = "a" * 40, "b" * 40

MERGEABLE = MergeRequestInfo(
    iid=7,
    web_url="https://gitlab.example.com/acme/widgets/-/merge_requests/7",
    state="opened",
    draft=False,
    sha=HEAD,
    source_branch="workqueue/x",
    target_branch="main",
    source_project_id=42,
    target_project_id=42,
    author_id=7,
    author_username="workqueue-bot",
    title="t",
    description="",
    labels=(),
    detailed_merge_status="mergeable",
    head_pipeline_id=11,
    head_pipeline_sha=HEAD,
    head_pipeline_status="success",
    merge_commit_sha=None,
    merge_error=None,
    closed_by_id=None,
)


def item(**fields):
    return MRWorkItem(**{"auto_merge": True, "mr_sha": HEAD, "target_branch": "main", **fields})


def test_mergeable_mr_with_a_green_pipeline_on_our_head_is_merged():
    assert merge_blocker(item(), MERGEABLE) is None


NO_PIPELINE = {"head_pipeline_id": None, "head_pipeline_sha": None, "head_pipeline_status": None}


CASES = [
    ({"auto_merge": False}, {}, False, "auto_merge_disabled", "auto_merge is off"),
    ({}, {"draft": True, "detailed_merge_status": "draft_status"}, False, "draft", "draft"),
    ({}, {"detailed_merge_status": "draft_status"}, False, "draft", "draft_status"),
    ({}, {"state": "locked"}, True, "gitlab_checking", "locked"),
    ({}, {"detailed_merge_status": "not_approved"}, False, "not_approved", "not_approved"),
    (
        {},
        {"detailed_merge_status": "requested_changes"},
        False,
        "requested_changes",
        "requested_changes",
    ),
    (
        {},
        {"detailed_merge_status": "discussions_not_resolved"},
        False,
        "discussions_not_resolved",
        "discussions",
    ),
    ({}, {"detailed_merge_status": "conflict"}, False, "conflict", "conflict"),
    ({}, {"detailed_merge_status": "need_rebase"}, False, "need_rebase", "need_rebase"),
    # ci_must_pass is refined from the head pipeline GitLab reports.
    (
        {},
        {"detailed_merge_status": "ci_must_pass", **NO_PIPELINE},
        False,
        "pipeline_missing",
        "no pipeline has run on the MR head",
    ),
    (
        {},
        {"detailed_merge_status": "ci_must_pass", "head_pipeline_status": "failed"},
        False,
        "pipeline_failed",
        "failed (ci_must_pass)",
    ),
    (
        {},
        {"detailed_merge_status": "ci_must_pass", "head_pipeline_sha": OLD},
        False,
        "pipeline_stale_sha",
        f"head pipeline 11 ran on {OLD}",
    ),
    (
        {},
        {"detailed_merge_status": "ci_still_running", "head_pipeline_status": "running"},
        True,
        "pipeline_running",
        "running",
    ),
    ({}, {"detailed_merge_status": "checking"}, True, "gitlab_checking", "checking"),
    ({}, {"detailed_merge_status": "unchecked"}, True, "gitlab_checking", "unchecked"),
    ({}, {"detailed_merge_status": "preparing"}, True, "gitlab_checking", "preparing"),
    (
        {},
        {"detailed_merge_status": "approvals_syncing"},
        True,
        "gitlab_checking",
        "approvals_syncing",
    ),
    ({}, {"detailed_merge_status": "commits_status"}, False, "other", "commits_status"),
    (
        {},
        {"detailed_merge_status": "merge_request_blocked"},
        False,
        "other",
        "merge_request_blocked",
    ),
    (
        {},
        {"detailed_merge_status": "jira_association_missing"},
        False,
        "other",
        "jira_association_missing",
    ),
    ({}, {"detailed_merge_status": None}, False, "other", "no detailed_merge_status"),
    # The MR head is not what the service pushed (a human's push, or GitLab lagging).
    ({"mr_sha": OLD}, {}, False, "foreign_commits", "not the commit the service pushed"),
    ({"mr_sha": None}, {}, False, "foreign_commits", "not the commit the service pushed"),
    (
        {"mr_sha": OLD},
        {"sha": None},
        False,
        "foreign_commits",
        "the MR head (none) is not",
    ),
    # A foreign head the service recorded outranks GitLab's status, even a settling one.
    (
        {"mr_sha": OLD, "foreign_head_sha": HEAD},
        {"detailed_merge_status": "checking"},
        False,
        "foreign_commits",
        f"someone else pushed {HEAD}",
    ),
    (
        {"mr_sha": OLD, "foreign_head_sha": HEAD},
        {"detailed_merge_status": "not_approved"},
        False,
        "foreign_commits",
        f"someone else pushed {HEAD}",
    ),
    # A settling status with an unexpected head may be GitLab catching up: look again.
    ({"mr_sha": OLD}, {"detailed_merge_status": "checking"}, True, "gitlab_checking", "check"),
    # The pipeline that succeeded ran on an older head: never merge on it.
    (
        {},
        {"head_pipeline_sha": OLD},
        False,
        "pipeline_stale_sha",
        f"no pipeline has run on the MR head {HEAD}: head pipeline 11 ran on {OLD}",
    ),
    ({}, NO_PIPELINE, False, "pipeline_missing", "no pipeline has run"),
    ({}, {"head_pipeline_status": "running"}, False, "pipeline_running", "running"),
    ({}, {"head_pipeline_status": "pending"}, False, "pipeline_running", "pending"),
    ({}, {"head_pipeline_status": "failed"}, False, "pipeline_failed", "failed"),
    ({}, {"head_pipeline_status": "canceled"}, False, "pipeline_failed", "canceled"),
    ({}, {"head_pipeline_status": "skipped"}, False, "pipeline_failed", "skipped"),
    ({}, {"head_pipeline_status": None}, False, "pipeline_missing", "no status"),
    # Someone retargeted the MR: what was tested is not what would land.
    ({}, {"target_branch": "release"}, False, "other", "targets release, not main"),
    ({"target_branch": "release"}, {}, False, "other", "targets main, not release"),
    # An MR from another project (a fork) is never the service's branch.
    ({}, {"source_project_id": 99}, False, "other", "from project 99"),
]


@pytest.mark.parametrize(("fields", "changes", "transient", "code", "why"), CASES)
def test_reasons_not_to_merge(fields, changes, transient, code, why):
    blocker = merge_blocker(item(**fields), replace(MERGEABLE, **changes))
    assert blocker is not None
    assert blocker.transient is transient
    assert blocker.code == code
    assert why in blocker.message
    # A missing value is said in words, never printed as Python's None.
    assert "None" not in blocker.message


# Codes the merge call itself gives (GitLab's answer to it), not the MR's read:
# tests/unit/types/mr/test_merge_attempts.py and tests/integration/mr/test_merge_paths_*.py.
MERGE_CALL_CODES = {BlockerCode.MERGE_REFUSED.value, BlockerCode.IN_MERGE_TRAIN.value}
# Codes of the external checks (the signal store, not the MR's read):
# tests/unit/signals/test_verdicts.py and tests/integration/mr/test_mr_checks.py.
CHECK_CODES = {BlockerCode.CHECKS_PENDING.value, BlockerCode.CHECKS_FAILED.value}


def test_every_code_is_covered_by_the_table():
    covered = {case[3] for case in CASES}
    assert covered == {code.value for code in BlockerCode} - MERGE_CALL_CODES - CHECK_CODES


MERGE_COMMIT = "c" * 40
MERGED_RESULT = replace(MERGEABLE, head_pipeline_sha=MERGE_COMMIT)


@pytest.mark.parametrize(
    ("answer", "tests_head", "code"),
    [
        (MERGED_RESULT, False, "pipeline_stale_sha"),  # not (yet) confirmed from GitLab
        (MERGED_RESULT, True, None),  # its merge commit merges the head: it counts
        (replace(MERGED_RESULT, head_pipeline_status="running"), True, "pipeline_running"),
        (replace(MERGED_RESULT, sha=OLD), True, "foreign_commits"),  # not our head anyway
    ],
)
def test_a_merged_results_pipeline_counts_only_once_confirmed(answer, tests_head, code):
    found = merge_blocker(item(), answer, pipeline_tests_head=tests_head)
    assert (found.code.value if found else None) == code


def test_stored_form_names_code_message_and_since():
    blocker = merge_blocker(item(), replace(MERGEABLE, detailed_merge_status="conflict"))
    assert blocker is not None
    assert blocker.stored("2026-01-01T00:00:00+00:00") == {
        "code": "conflict",
        "message": "GitLab says detailed_merge_status is conflict",
        "since": "2026-01-01T00:00:00+00:00",
    }
