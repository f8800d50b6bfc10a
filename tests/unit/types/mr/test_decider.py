from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from workqueue.queue.contract import Action
from workqueue.queue.dimensions import Dimensions, DimensionState
from workqueue.queue.models import DimensionStatus
from workqueue.types.mr.decider import decide_mr
from workqueue.types.mr.models import MRWorkItem

NOW = datetime(2026, 11, 29, tzinfo=UTC)
LATER = NOW + timedelta(minutes=30)
EARLIER = NOW - timedelta(minutes=1)
T, F = DimensionStatus.TRUE, DimensionStatus.FALSE


def row(dimension, status, variant="", pending_until=None):
    return DimensionState(dimension, variant, status, pending_until)


DRIFT_LATER = row("needs_drift_check", T, "", LATER)
SETTLED = [
    row("needs_mr", F),
    row("needs_reconcile", F),
    row("needs_empty_check", T, "", LATER),
    DRIFT_LATER,
]


@pytest.mark.parametrize(
    ("rows", "expected"),
    [
        ([], Action("ensure_mr")),  # a new item has no rows: it needs its MR first
        ([row("needs_mr", T)], Action("ensure_mr")),
        ([row("needs_mr", T, "", LATER)], Action("reconcile_mr")),  # deferred: next concern
        ([row("needs_mr", F)], Action("reconcile_mr")),  # absent reconcile row: look once
        (SETTLED, None),  # everything handled, empty check not yet due
        (
            [*SETTLED[:2], row("needs_empty_check", T, "", EARLIER), DRIFT_LATER],
            Action("check_empty_diff"),
        ),
        ([*SETTLED[:2], row("needs_empty_check", F), DRIFT_LATER], None),
        # Drift checks come last: no row yet (a new item's first), or due.
        (SETTLED[:3], Action("check_drift")),
        ([*SETTLED[:3], row("needs_drift_check", T, "", EARLIER)], Action("check_drift")),
        ([*SETTLED[:3], row("needs_drift_check", F)], None),  # drift checks off
        (
            [*SETTLED[:2], row("needs_empty_check", T, "", EARLIER), row("needs_drift_check", T)],
            Action("check_empty_diff"),
        ),
        ([*SETTLED, row("needs_reconcile", T)], Action("reconcile_mr")),
        (
            [*SETTLED, row("needs_ci_retry", T, "test"), row("needs_ci_retry", T, "build")],
            Action("retry_ci", "build"),
        ),
        ([*SETTLED, row("needs_ci_retry", F, "test")], None),
        ([*SETTLED, row("needs_ci_retry", T, "lint", LATER)], None),  # retry delay pending
        (
            [row("needs_mr", T), row("needs_reconcile", T), row("needs_ci_retry", T, "x")],
            Action("ensure_mr"),
        ),
        (
            [row("needs_mr", F), row("needs_reconcile", T), row("needs_ci_retry", T, "x")],
            Action("reconcile_mr"),
        ),
    ],
)
def test_decide_mr(rows, expected):
    assert decide_mr(MRWorkItem(), Dimensions(rows, NOW)) == expected


def test_decider_is_pure():
    dimensions = Dimensions([*SETTLED, row("needs_ci_retry", T, "a")], NOW)
    item = MRWorkItem()
    assert {decide_mr(item, dimensions) for _ in range(5)} == {Action("retry_ci", "a")}
