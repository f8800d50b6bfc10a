from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from workqueue.queue.dimensions import Dimensions, DimensionState
from workqueue.queue.models import DimensionStatus
from workqueue.queue.registry import Action
from workqueue.types.mr.decider import decide_mr
from workqueue.types.mr.models import MRWorkItem

NOW = datetime(2026, 11, 29, tzinfo=UTC)
TRUE, FALSE = DimensionStatus.TRUE, DimensionStatus.FALSE


@pytest.mark.parametrize(
    ("rows", "expected"),
    [
        ([], Action("ensure_mr")),  # a new item has no rows: it needs its MR
        ([DimensionState("needs_mr", "", TRUE)], Action("ensure_mr")),
        ([DimensionState("needs_mr", "", FALSE)], None),
        ([DimensionState("needs_mr", "", TRUE, NOW + timedelta(minutes=1))], None),
        ([DimensionState("needs_mr", "", TRUE, NOW - timedelta(minutes=1))], Action("ensure_mr")),
        ([DimensionState("needs_other", "", TRUE), DimensionState("needs_mr", "", FALSE)], None),
    ],
)
def test_decide_mr(rows, expected):
    assert decide_mr(MRWorkItem(), Dimensions(rows, NOW)) == expected
