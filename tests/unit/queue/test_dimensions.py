from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from workqueue.queue.dimensions import Dimensions, DimensionState, DimensionUpdate
from workqueue.queue.models import DimensionStatus

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
TRUE, FALSE = DimensionStatus.TRUE, DimensionStatus.FALSE


@pytest.mark.parametrize(
    ("rows", "expected"),
    [
        ([], True),  # absent row: action needed
        ([DimensionState("needs_x", "", TRUE)], True),
        ([DimensionState("needs_x", "", FALSE)], False),
        ([DimensionState("needs_x", "", TRUE, NOW + timedelta(seconds=1))], False),  # deferred
        ([DimensionState("needs_x", "", TRUE, NOW)], True),  # due exactly now
        ([DimensionState("needs_x", "", TRUE, NOW - timedelta(minutes=1))], True),
        ([DimensionState("needs_x", "", FALSE, NOW - timedelta(minutes=1))], False),
        ([DimensionState("needs_x", "other", FALSE)], True),  # another variant
        ([DimensionState("needs_y", "", FALSE)], True),  # another dimension
    ],
)
def test_needs(rows, expected):
    assert Dimensions(rows, NOW).needs("needs_x") is expected


def test_variants_needing_lists_due_true_variants_in_order():
    rows = [
        DimensionState("needs_retry", "lint", TRUE),
        DimensionState("needs_retry", "build", TRUE),
        DimensionState("needs_retry", "test", FALSE),
        DimensionState("needs_retry", "deploy", TRUE, NOW + timedelta(minutes=5)),
        DimensionState("needs_other", "zzz", TRUE),
    ]
    assert Dimensions(rows, NOW).variants_needing("needs_retry") == ["build", "lint"]


def test_with_updates_overlays_without_mutating():
    original = Dimensions([DimensionState("needs_x", "", TRUE)], NOW)
    updated = original.with_updates([DimensionUpdate("needs_x", FALSE)])
    assert original.needs("needs_x")
    assert not updated.needs("needs_x")
    assert updated.state_of("needs_x") == {"status": "false", "pending_until": None}
    assert original.state_of("needs_missing") is None
