"""`contract.dimension_changes`: which dimension writes are audited as changes."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from workqueue.queue.contract import DimensionStatus, DimensionUpdate, dimension_changes

LATER = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
TRUE, FALSE = DimensionStatus.TRUE, DimensionStatus.FALSE


@pytest.mark.parametrize(
    ("update", "before", "expected"),
    [
        (DimensionUpdate("needs_x", TRUE), None, True),  # a new row
        (DimensionUpdate("needs_x", TRUE), {"status": "true", "pending_until": None}, False),
        (DimensionUpdate("needs_x", FALSE), {"status": "true", "pending_until": None}, True),
        (DimensionUpdate("needs_x", FALSE), {"status": "false", "pending_until": None}, False),
        # A deferral is a change of its own: same status, a new time to look again.
        (
            DimensionUpdate("needs_x", TRUE, pending_until=LATER),
            {"status": "true", "pending_until": None},
            True,
        ),
        (
            DimensionUpdate("needs_x", TRUE, pending_until=LATER),
            {"status": "true", "pending_until": LATER},
            False,
        ),
        (
            DimensionUpdate("needs_x", TRUE),
            {"status": "true", "pending_until": LATER},
            True,
        ),  # the deferral cleared
    ],
)
def test_dimension_changes(update, before, expected):
    assert dimension_changes(update, before) is expected
