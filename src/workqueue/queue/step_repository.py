"""The SQL of a processing step: read a batch of claimed items, write their outcomes.

A step reads every item of its batch in one statement and ends them all in
two or three: the dimension rows the step changed, the events it consumed,
and `workqueue_finish_steps` (migration 0012), which idles or continues each
item fenced on its own lease token. Statements go to the driver (psycopg)
where SQLAlchemy's per-statement overhead would cost more than the statement,
and arrays as one literal each (`pg_arrays`).

Nothing here commits.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql
from sqlalchemy.orm import Session

from workqueue.queue import pg_arrays
from workqueue.queue.dimensions import DimensionState, DimensionUpdate
from workqueue.queue.lease_repository import Claim
from workqueue.queue.models import DimensionStatus, PendingEvent, WorkItem, WorkItemStatus
from workqueue.queue.repository import driver_connection


@dataclass(frozen=True, slots=True)
class StepSnapshot:
    """What a step knows of one item before it starts: read in the batch's one query."""

    item: WorkItem
    now: datetime
    dimensions: list[DimensionState]
    has_events: bool


def load_batch(
    session: Session, model: type[WorkItem], item_ids: Sequence[uuid.UUID]
) -> dict[uuid.UUID, StepSnapshot]:
    """The items (with their detail columns), the database clock, dimensions and events flags.

    Items that no longer exist are absent from the answer.
    """
    rows = session.execute(
        _batch_snapshot_query(model),
        {"item_ids": pg_arrays.uuids(item_ids)},
        execution_options={"populate_existing": True},
    ).all()
    snapshots = {}
    for item, now, has_events, dimension_rows in rows:
        dimensions = [
            DimensionState(
                dimension,
                variant,
                DimensionStatus(status),
                datetime.fromisoformat(pending_until) if pending_until else None,
            )
            for dimension, variant, status, pending_until in dimension_rows
        ]
        snapshots[item.id] = StepSnapshot(item, now, dimensions, has_events)
    return snapshots


@functools.cache
def _batch_snapshot_query(model: type[WorkItem]) -> sa.Select[Any]:
    # Built once per model: constructing the statement costs more than running it.
    dimension_rows = (
        sa.select(
            sa.func.coalesce(
                sa.func.json_agg(
                    sa.func.json_build_array(
                        WorkItemStatus.dimension,
                        WorkItemStatus.variant,
                        WorkItemStatus.status,
                        WorkItemStatus.pending_until,
                    )
                ),
                sa.text("'[]'::json"),
            )
        )
        .where(WorkItemStatus.work_item_id == model.id)
        .scalar_subquery()
    )
    has_events = sa.exists().where(PendingEvent.work_item_id == model.id)
    # One array literal (`pg_arrays`), not a list psycopg adapts element by element.
    ids = sa.cast(sa.bindparam("item_ids", type_=sa.Text()), postgresql.ARRAY(sa.Uuid()))
    return sa.select(model, sa.func.now(), has_events, dimension_rows).where(
        model.id == sa.any_(ids)
    )


_WRITE_DIMENSIONS = (
    "INSERT INTO work_item_statuses (work_item_id, dimension, variant, status, pending_until) "
    "SELECT * FROM unnest(%s::uuid[], %s::text[], %s::text[], %s::text[], %s::timestamptz[]) "
    "ON CONFLICT (work_item_id, dimension, variant) DO UPDATE SET "
    "  status = excluded.status, pending_until = excluded.pending_until, updated_at = now()"
)


def write_dimensions(
    session: Session, updates: Iterable[tuple[uuid.UUID, DimensionUpdate]]
) -> None:
    """Upsert the dimension rows a batch changed, in one statement (last update of a row wins)."""
    latest: dict[tuple[uuid.UUID, str, str], DimensionUpdate] = {}
    for item_id, update in updates:
        latest[(item_id, update.dimension, update.variant)] = update
    if not latest:
        return
    driver_connection(session).execute(
        _WRITE_DIMENSIONS,
        (
            pg_arrays.uuids(item_id for item_id, _, _ in latest),
            pg_arrays.texts(dimension for _, dimension, _ in latest),
            pg_arrays.texts(variant for _, _, variant in latest),
            pg_arrays.texts(update.status.value for update in latest.values()),
            pg_arrays.timestamps(update.pending_until for update in latest.values()),
        ),
    )


@dataclass(frozen=True, slots=True)
class WaitingEvent:
    """One stored event as a step drains it."""

    id: int
    event_type: str
    body: dict[str, Any]
    received_at: datetime


def pending_events(session: Session, item_id: uuid.UUID) -> list[WaitingEvent]:
    """An item's waiting events, oldest first."""
    rows = (
        driver_connection(session)
        .execute(
            "SELECT id, event_type, body, received_at FROM pending_events "
            "WHERE work_item_id = %s ORDER BY id",
            (item_id,),
        )
        .fetchall()
    )
    return [WaitingEvent(*row) for row in rows]


def delete_events(session: Session, event_ids: Sequence[int]) -> None:
    """Drop the events a batch consumed."""
    if event_ids:
        driver_connection(session).execute(
            "DELETE FROM pending_events WHERE id = ANY(%s)", (list(event_ids),)
        )


@dataclass(frozen=True, slots=True)
class StepEnd:
    """How one item's step should end: idle if nothing is left, or keep the lease."""

    claim: Claim
    seen_updated_at: datetime
    want_idle: bool
    action_succeeded: bool


def finish_steps(
    session: Session, ends: Sequence[StepEnd], *, lease_seconds: float, wait_for_locks: bool
) -> Mapping[uuid.UUID, str]:
    """End a batch of steps in one round trip: item id → "idle" or "continue".

    An item absent from the answer is no longer leased by this claim: nothing
    of its step may be committed.
    """
    if not ends:
        return {}
    rows = (
        driver_connection(session)
        .execute(
            "SELECT item_id, outcome FROM workqueue_finish_steps("
            "%s::uuid[], %s::uuid[], %s::timestamptz[], %s::boolean[], %s::boolean[], %s, %s)",
            (
                pg_arrays.uuids(end.claim.item_id for end in ends),
                pg_arrays.uuids(end.claim.lease_token for end in ends),
                pg_arrays.timestamps(end.seen_updated_at for end in ends),
                pg_arrays.booleans(end.want_idle for end in ends),
                pg_arrays.booleans(end.action_succeeded for end in ends),
                lease_seconds,
                # A lone item may wait for its lock; a batch must not (see 0012),
                # even with a single success: its failures' rows are locked too.
                wait_for_locks,
            ),
        )
        .fetchall()
    )
    return {row[0]: row[1] for row in rows}
