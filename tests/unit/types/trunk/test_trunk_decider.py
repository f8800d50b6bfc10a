"""Table tests of the trunk decision tree, strategy choice and pipeline outcomes."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest

from workqueue.queue.dimensions import Dimensions, DimensionState
from workqueue.queue.models import DimensionStatus
from workqueue.types.trunk.decider import (
    PROCESS,
    RECORD,
    Ancestry,
    QueueView,
    Step,
    choose_strategy,
    decide_trunk,
    outcome_of,
    plan_process,
)
from workqueue.types.trunk.models import BuildStrategy, TrunkState, TrunkWorkItem

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def view(in_flight=0, latest=5, cap=1, serial=False) -> QueueView:
    return QueueView(
        in_flight=in_flight, latest_sequence=latest, max_concurrent=cap, serial_until_green=serial
    )


@pytest.mark.parametrize(
    ("state", "sequence", "queue", "expected"),
    [
        # terminal: nothing, whatever the queue says
        (TrunkState.SUPERSEDED, 5, view(), Step.NOTHING),
        (TrunkState.SUCCEEDED, 5, view(), Step.NOTHING),
        (TrunkState.FAILED, 1, view(in_flight=1), Step.NOTHING),
        (TrunkState.CANCELLED, 5, view(), Step.NOTHING),
        # processing: (re)publish the build, never superseded, never gated
        (TrunkState.PROCESSING, 1, view(in_flight=1, latest=9), Step.BUILD),
        # coalescing before the gate: superseded with the gate open or closed
        (TrunkState.ACCEPTED, 4, view(in_flight=0), Step.SUPERSEDE),
        (TrunkState.ACCEPTED, 4, view(in_flight=1), Step.SUPERSEDE),
        # newest: wait while every slot is taken, else admit
        (TrunkState.ACCEPTED, 5, view(in_flight=1), Step.WAIT),
        (TrunkState.ACCEPTED, 5, view(in_flight=0), Step.ADMIT),
        # speculative (cap 2): the newest two are kept, the third is superseded
        (TrunkState.ACCEPTED, 4, view(in_flight=1, cap=2), Step.ADMIT),
        (TrunkState.ACCEPTED, 3, view(in_flight=1, cap=2), Step.SUPERSEDE),
        (TrunkState.ACCEPTED, 5, view(in_flight=2, cap=2), Step.WAIT),
        # after a rewrite: one at a time and only the newest kept, until a full build is green
        (TrunkState.ACCEPTED, 4, view(in_flight=0, cap=2, serial=True), Step.SUPERSEDE),
        (TrunkState.ACCEPTED, 5, view(in_flight=1, cap=2, serial=True), Step.WAIT),
        (TrunkState.ACCEPTED, 5, view(in_flight=0, cap=2, serial=True), Step.ADMIT),
    ],
)
def test_plan_process(state, sequence, queue, expected):
    assert plan_process(state, sequence, queue) is expected


@pytest.mark.parametrize(
    ("last_green", "ancestry", "strategy", "base", "rewrite", "warned"),
    [
        (None, None, BuildStrategy.FULL, None, False, False),  # cold start
        ("a" * 40, Ancestry.ANCESTOR, BuildStrategy.INCREMENTAL, "a" * 40, False, False),
        ("a" * 40, Ancestry.NOT_ANCESTOR, BuildStrategy.FULL, None, True, False),  # rewrite
        ("a" * 40, Ancestry.UNKNOWN, BuildStrategy.FULL, None, False, True),  # 404: warn
    ],
)
def test_choose_strategy(last_green, ancestry, strategy, base, rewrite, warned):
    chosen = choose_strategy(last_green, ancestry)
    assert (chosen.build_strategy, chosen.base_sha, chosen.rewrite) == (strategy, base, rewrite)
    assert (chosen.warning is not None) is warned


@pytest.mark.parametrize(
    ("status", "outcome"),
    [
        ("success", TrunkState.SUCCEEDED),
        ("failed", TrunkState.FAILED),
        ("canceled", TrunkState.CANCELLED),
        ("skipped", TrunkState.CANCELLED),
        ("running", None),
        ("pending", None),
        ("created", None),
        ("manual", None),
        ("canceling", None),
    ],
)
def test_outcome_of_pipeline_status(status, outcome):
    assert outcome_of(status) is outcome


def _item(state: TrunkState, pipeline_id: int | None = None) -> TrunkWorkItem:
    return TrunkWorkItem(id=uuid.uuid4(), state=state, pipeline_id=pipeline_id, sequence=1)


def _dims(**rows: tuple[DimensionStatus, datetime | None]) -> Dimensions:
    return Dimensions(
        [DimensionState(name, "", status, pending) for name, (status, pending) in rows.items()],
        NOW,
    )


LATER = NOW + timedelta(seconds=30)


@pytest.mark.parametrize(
    ("item", "dimensions", "action"),
    [
        (_item(TrunkState.ACCEPTED), _dims(), PROCESS),  # a new head: absent row = needed
        (_item(TrunkState.ACCEPTED), _dims(needs_process=(DimensionStatus.TRUE, LATER)), None),
        (_item(TrunkState.PROCESSING), _dims(needs_process=(DimensionStatus.TRUE, None)), PROCESS),
        (_item(TrunkState.PROCESSING, 7), _dims(needs_record=(DimensionStatus.TRUE, None)), RECORD),
        (_item(TrunkState.PROCESSING, 7), _dims(needs_record=(DimensionStatus.TRUE, LATER)), None),
        (_item(TrunkState.PROCESSING, 7), _dims(needs_record=(DimensionStatus.FALSE, None)), None),
        (_item(TrunkState.SUCCEEDED, 7), _dims(), None),
        (_item(TrunkState.SUPERSEDED), _dims(), None),
    ],
)
def test_decide_trunk(item, dimensions, action):
    decided = decide_trunk(item, dimensions)
    assert (None if decided is None else decided.name) == action
