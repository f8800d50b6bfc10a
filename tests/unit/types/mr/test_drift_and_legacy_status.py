"""Pure parts of issue 22's drift checks and older GitLab answers: what counts as a
correction, how a webhook pushes the check back, and how an answer without
`detailed_merge_status` is read."""

from __future__ import annotations

import uuid
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from workqueue.gitlab.models import MergeRequestInfo
from workqueue.queue.contract import EventContext, EventResult
from workqueue.queue.dimensions import Dimensions, DimensionState, DimensionUpdate
from workqueue.queue.models import DimensionStatus
from workqueue.queue.registry import TypeRegistry
from workqueue.types.mr.config import MRTypeConfig
from workqueue.types.mr.decider import decide_mr
from workqueue.types.mr.executors.drift_check import DriftCounts, corrections, push_back_on_events
from workqueue.types.mr.executors.legacy_merge_status import legacy_merge_status
from workqueue.types.mr.executors.merge_blockers import BlockerCode, merge_blocker
from workqueue.types.mr.models import MRDimension, MRWorkItem

HEAD, OTHER = "a" * 40, "c" * 40
NOW = datetime(2026, 12, 10, tzinfo=UTC)

MR = MergeRequestInfo(
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
    head_pipeline_status="running",
    merge_commit_sha=None,
    merge_error=None,
    closed_by_id=None,
    merge_status="can_be_merged",
)
# An answer of GitLab before 15.6.
LEGACY = replace(MR, detailed_merge_status=None, head_pipeline_status="success")


def knowing(merge_request: MergeRequestInfo, **fields: object) -> MRWorkItem:
    """An item that knows what `merge_request` shows (then `fields` change)."""
    known = {
        "auto_merge": True,
        "target_branch": "main",
        "mr_sha": merge_request.sha,
        "head_pipeline_id": merge_request.head_pipeline_id,
        "head_pipeline_sha": merge_request.head_pipeline_sha,
        "head_pipeline_status": merge_request.head_pipeline_status,
        "detailed_merge_status": merge_request.detailed_merge_status,
    }
    return MRWorkItem(**{**known, **fields})


@pytest.mark.parametrize(
    ("shown", "known", "expected"),
    [
        ({}, {}, []),
        ({"state": "merged"}, {}, ["merged"]),
        ({"state": "closed", "head_pipeline_status": "success"}, {}, ["closed"]),
        ({"head_pipeline_status": "success"}, {}, ["pipeline"]),
        ({"head_pipeline_id": 12}, {}, ["pipeline"]),
        ({}, {"head_pipeline_id": None, "head_pipeline_sha": None}, ["pipeline"]),
        ({"sha": OTHER}, {}, ["head"]),
        ({"sha": OTHER}, {"foreign_head_sha": OTHER}, []),  # a foreign head already seen
        # A foreign head already shown as foreign_commits; and back on ours, news again.
        ({"sha": OTHER}, {"merge_blocker": {"code": "foreign_commits"}}, []),
        ({}, {"merge_blocker": {"code": "foreign_commits"}}, ["head"]),
        ({}, {"merge_blocker": {"code": "foreign_commits"}, "foreign_head_sha": OTHER}, []),
        ({}, {"detailed_merge_status": "not_approved"}, ["approval"]),
        ({}, {"detailed_merge_status": "ci_still_running"}, ["merge_status"]),
        (
            {"head_pipeline_status": "success", "detailed_merge_status": "mergeable"},
            {"detailed_merge_status": "ci_still_running"},
            ["pipeline", "merge_status"],
        ),
    ],
)
def test_corrections(shown, known, expected):
    assert corrections(knowing(MR, **known), replace(MR, **shown)) == expected


def test_an_answer_without_detailed_status_is_compared_on_state_head_and_pipeline():
    assert corrections(knowing(LEGACY), LEGACY) == []
    assert corrections(knowing(LEGACY), replace(LEGACY, draft=True)) == []
    assert corrections(knowing(LEGACY), replace(LEGACY, head_pipeline_id=99)) == ["pipeline"]


def test_drift_counts_count_checks_and_corrections_by_kind():
    counts = DriftCounts()
    counts.checked([])
    counts.checked(["pipeline", "approval"])
    assert counts.checks() == {(): 2.0}
    found = counts.corrections()
    assert found[("pipeline",)] == found[("approval",)] == 1.0
    assert found[("merged",)] == 0.0


def _context(rows: list[DimensionState]) -> EventContext:
    return EventContext(
        session=None,  # the handlers here read no session
        item=MRWorkItem(id=uuid.uuid4()),
        dimensions=Dimensions(rows, NOW),
        event_type="merge_request",
        body={},
        received_at=NOW,
    )


def _registration(seconds: float, result: EventResult | None):
    registry = TypeRegistry()
    config = MRTypeConfig(drift_check_seconds=seconds)
    registration = registry.register("mr", model=MRWorkItem, decider=decide_mr, config=config)
    registration.add_event_handler("merge_request", lambda _context: result)
    push_back_on_events(registration, config)
    return registration.event_handlers["merge_request"]


RECONCILE = DimensionUpdate(MRDimension.NEEDS_RECONCILE, DimensionStatus.TRUE)
DEFERRED = [DimensionState(MRDimension.NEEDS_DRIFT_CHECK, "", DimensionStatus.TRUE, NOW)]


def test_an_applied_webhook_pushes_the_drift_check_back():
    handler = _registration(300, EventResult(dimensions=(RECONCILE,), reason="update"))
    result = handler(_context(DEFERRED))
    assert result is not None
    assert result.reason == "update"
    assert result.dimensions == (
        RECONCILE,
        DimensionUpdate(
            MRDimension.NEEDS_DRIFT_CHECK,
            DimensionStatus.TRUE,
            pending_until=NOW + timedelta(seconds=300),
        ),
    )


def test_an_ignored_webhook_changes_nothing():
    assert _registration(300, None)(_context(DEFERRED)) is None


def test_before_the_first_check_a_webhook_leaves_it_alone():
    result = EventResult(dimensions=(RECONCILE,))
    assert _registration(300, result)(_context([])) == result


def test_with_drift_checks_off_the_handlers_are_left_as_they_are():
    result = EventResult(dimensions=(RECONCILE,))
    assert _registration(0, result)(_context(DEFERRED)) == result


@pytest.mark.parametrize(
    ("shown", "expected"),
    [
        ({"merge_status": None}, None),
        ({}, "mergeable"),
        ({"draft": True}, "draft_status"),
        ({"draft": True, "has_conflicts": True}, "draft_status"),
        ({"merge_status": "unchecked"}, "checking"),
        ({"merge_status": "checking"}, "checking"),
        ({"merge_status": "cannot_be_merged_recheck"}, "checking"),
        ({"merge_status": "cannot_be_merged", "has_conflicts": True}, "conflict"),
        ({"merge_status": "cannot_be_merged"}, "conflict"),
        ({"blocking_discussions_resolved": False}, "discussions_not_resolved"),
        ({"merge_status": "something_new"}, None),
    ],
)
def test_legacy_merge_status(shown, expected):
    assert legacy_merge_status(replace(LEGACY, **shown)) == expected


@pytest.mark.parametrize(
    ("shown", "code"),
    [
        ({}, None),  # merged: mergeable, green pipeline on the head
        ({"merge_status": "checking"}, BlockerCode.GITLAB_CHECKING),
        ({"has_conflicts": True, "merge_status": "cannot_be_merged"}, BlockerCode.CONFLICT),
        ({"blocking_discussions_resolved": False}, BlockerCode.DISCUSSIONS_NOT_RESOLVED),
        ({"draft": True}, BlockerCode.DRAFT),
        ({"head_pipeline_status": "running"}, BlockerCode.PIPELINE_RUNNING),
        ({"merge_status": None}, BlockerCode.OTHER),  # nothing to judge by
    ],
)
def test_answers_without_detailed_status_are_judged_by_their_older_fields(shown, code):
    blocker = merge_blocker(knowing(LEGACY), replace(LEGACY, **shown))
    assert (blocker.code if blocker else None) == code
