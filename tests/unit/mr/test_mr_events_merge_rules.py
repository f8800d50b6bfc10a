"""When reconcile_mr merges, and when it waits (and whether for an event or a deferral)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from workqueue.gitlab.models import MergeRequestInfo
from workqueue.types.mr.models import MRWorkItem
from workqueue.types.mr.reconcile import merge_blocker

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


@pytest.mark.parametrize(
    ("fields", "changes", "transient", "why"),
    [
        ({"auto_merge": False}, {}, False, "auto_merge is off"),
        ({}, {"draft": True, "detailed_merge_status": "draft_status"}, False, "draft"),
        ({}, {"state": "locked"}, True, "locked"),
        ({}, {"detailed_merge_status": "not_approved"}, False, "not_approved"),
        ({}, {"detailed_merge_status": "conflict"}, False, "conflict"),
        ({}, {"detailed_merge_status": "ci_must_pass"}, False, "ci_must_pass"),
        ({}, {"detailed_merge_status": "discussions_not_resolved"}, False, "discussions"),
        ({}, {"detailed_merge_status": "checking"}, True, "checking"),
        ({}, {"detailed_merge_status": "unchecked"}, True, "unchecked"),
        ({}, {"detailed_merge_status": "preparing"}, True, "preparing"),
        ({}, {"detailed_merge_status": "ci_still_running"}, True, "ci_still_running"),
        ({}, {"detailed_merge_status": "approvals_syncing"}, True, "approvals_syncing"),
        ({}, {"detailed_merge_status": None}, False, "None"),
        # The MR head is not what the service pushed (a human's push, or GitLab lagging).
        ({"mr_sha": OLD}, {}, False, "not the commit the service pushed"),
        ({"mr_sha": None}, {}, False, "not the commit the service pushed"),
        # The pipeline that succeeded ran on an older head: never merge on it.
        ({}, {"head_pipeline_sha": OLD}, False, "no pipeline has run on the MR head"),
        (
            {},
            {"head_pipeline_id": None, "head_pipeline_sha": None, "head_pipeline_status": None},
            False,
            "no pipeline has run",
        ),
        ({}, {"head_pipeline_status": "running"}, False, "running"),
        ({}, {"head_pipeline_status": "failed"}, False, "failed"),
        ({}, {"head_pipeline_status": "skipped"}, False, "skipped"),
        # Someone retargeted the MR: what was tested is not what would land.
        ({}, {"target_branch": "release"}, False, "targets release, not main"),
        ({"target_branch": "release"}, {}, False, "targets main, not release"),
        # An MR from another project (a fork) is never the service's branch.
        ({}, {"source_project_id": 99}, False, "from project 99"),
    ],
)
def test_reasons_not_to_merge(fields, changes, transient, why):
    blocker = merge_blocker(item(**fields), replace(MERGEABLE, **changes))
    assert blocker is not None
    assert blocker.transient is transient
    assert why in blocker.why
