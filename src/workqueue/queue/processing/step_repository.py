"""The SQL of a processing step: read a batch of claimed items, write their outcomes.

A step reads every item of its batch, with its dimension rows and waiting
events, in one statement (the items made persistent in the step's session
without the ORM's loading) and ends them all in one or two: the dimension
rows the step changed with the events it consumed, and `workqueue_finish_steps`
(migration 0012), which idles or continues each item fenced on its own lease
token. Statements go to the driver (psycopg) where SQLAlchemy's per-statement
overhead would cost more than the statement, and arrays as one literal each
(`pg_arrays`).

Nothing here commits.
"""

from __future__ import annotations

import functools
import json
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql
from sqlalchemy.orm import Mapper, Session, make_transient_to_detached
from sqlalchemy.orm.attributes import InstrumentedAttribute, instance_dict

from workqueue.queue import pg_arrays
from workqueue.queue.dimensions import DimensionState, DimensionUpdate
from workqueue.queue.enqueue import driver_connection
from workqueue.queue.models import DimensionStatus, PendingEvent, WorkItem, WorkItemStatus
from workqueue.queue.processing.lease_repository import Claim


@dataclass(frozen=True, slots=True)
class WaitingEvent:
    """One stored event as a step drains it."""

    id: int
    event_type: str
    body: dict[str, Any]
    received_at: datetime


# Up to this many items a batch is read by the driver: that saves about 0.2 ms
# of the ORM's per-statement work, but attaching each row's item
# (`_manufacture`) costs about 8 us more than the ORM's loader does per row
# (measured on the no-op type: 0.26 against 0.43 ms for 1 item, 0.99 against
# 0.89 ms for 32). Lone steps, the webhook path, are one item.
DRIVER_READ_MAX_ITEMS = 16


@dataclass(frozen=True)
class StepSnapshot:
    """What a step knows of one item before it starts: read in the batch's one query."""

    item: WorkItem
    now: datetime
    dimensions: list[DimensionState]
    # The waiting events as the batch read them (a JSON array, None when there
    # are none), parsed only for an item the step reaches: one whose step
    # budget ran out first is read again by the next step.
    events_json: str | None

    @property
    def has_events(self) -> bool:
        return self.events_json is not None

    @functools.cached_property
    def events(self) -> list[WaitingEvent]:
        """The waiting events, oldest first (their times are ISO 8601 strings in JSON)."""
        return [
            WaitingEvent(event_id, event_type, body, datetime.fromisoformat(received_at))
            for event_id, event_type, body, received_at in json.loads(self.events_json or "[]")
        ]


def load_batch(
    session: Session, model: type[WorkItem], item_ids: Sequence[uuid.UUID]
) -> dict[uuid.UUID, StepSnapshot]:
    """The items (with their detail columns), the database clock, dimensions and waiting events.

    Items that no longer exist are absent from the answer. A small batch in a
    session that holds no objects yet (a step's) goes to the driver and its
    items are made persistent from the rows (`_manufacture`); otherwise it is
    read through the ORM.
    """
    if len(item_ids) > DRIVER_READ_MAX_ITEMS or len(session.identity_map):
        return _load_batch_orm(session, model, item_ids)
    query = _driver_query(model, session.get_bind().dialect)
    if query is None:
        return _load_batch_orm(session, model, item_ids)
    cursor = driver_connection(session).execute(
        query.sql, {**query.params, "item_ids": pg_arrays.uuids(item_ids)}
    )
    conversions = query.conversions(cursor)
    width = len(query.keys)
    snapshots = {}
    for row in cursor.fetchall():
        item = _manufacture(session, query.mapper, query.keys, conversions, row)
        now, events_json, dimension_rows = row[width:]
        snapshots[item.id] = _snapshot(item, now, events_json, dimension_rows)
    return snapshots


def _load_batch_orm(
    session: Session, model: type[WorkItem], item_ids: Sequence[uuid.UUID]
) -> dict[uuid.UUID, StepSnapshot]:
    rows = session.execute(
        _batch_snapshot_query(model),
        {"item_ids": pg_arrays.uuids(item_ids)},
        execution_options={"populate_existing": True},
    ).all()
    return {
        item.id: _snapshot(item, now, events_json, dimension_rows)
        for item, now, events_json, dimension_rows in rows
    }


def _snapshot(
    item: WorkItem,
    now: datetime,
    events_json: str | None,
    dimension_rows: Sequence[Sequence[Any]],
) -> StepSnapshot:
    """The dimension rows come as JSON: their times are ISO 8601 strings."""
    dimensions = [
        DimensionState(
            dimension,
            variant,
            DimensionStatus(status),
            datetime.fromisoformat(pending_until) if pending_until else None,
        )
        for dimension, variant, status, pending_until in dimension_rows
    ]
    return StepSnapshot(item, now, dimensions, events_json)


@functools.cache
def _batch_snapshot_query(model: type[WorkItem]) -> sa.Select[Any]:
    # Built once per model: constructing the statement costs more than running it.
    events, dimension_rows, ids = _step_columns(model.id)
    return sa.select(model, sa.func.now(), events, dimension_rows).where(model.id == sa.any_(ids))


def _step_columns(
    item_id: sa.ColumnElement[uuid.UUID] | InstrumentedAttribute[uuid.UUID],
) -> tuple[sa.ScalarSelect[Any], sa.ScalarSelect[Any], sa.ColumnElement[Any]]:
    """What a step reads beside the item: its waiting events (NULL when none) and
    dimension rows; the ids.

    The events come with the batch rather than in a statement per item as it
    drains them: one that arrives meanwhile stays for the next step, which the
    idle decision sees (it never idles an item with a waiting event).
    """
    events = (
        sa.select(
            sa.cast(
                sa.func.json_agg(
                    postgresql.aggregate_order_by(
                        sa.func.json_build_array(
                            PendingEvent.id,
                            PendingEvent.event_type,
                            PendingEvent.body,
                            PendingEvent.received_at,
                        ),
                        PendingEvent.id,
                    )
                ),
                sa.Text(),
            )
        )
        .where(PendingEvent.work_item_id == item_id)
        .scalar_subquery()
    )
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
        .where(WorkItemStatus.work_item_id == item_id)
        .scalar_subquery()
    )
    # One array literal (`pg_arrays`), not a list psycopg adapts element by element.
    ids = sa.cast(sa.bindparam("item_ids", type_=sa.Text()), postgresql.ARRAY(sa.Uuid()))
    return events, dimension_rows, ids


@dataclass
class _DriverQuery:
    """A model's batch read as SQL for the driver, and how its columns become attributes.

    Through the ORM, the same read cost about three times what the statement
    does (result metadata rebuilt per execution, 45 column descriptions for
    `mr`, the loading machinery per row): most of a step's load.
    """

    mapper: Mapper[Any]
    sql: str
    keys: tuple[str, ...]  # the attribute of each item column, in select order
    params: dict[str, Any]  # beside the ids
    dialect: sa.Dialect
    columns: tuple[sa.Column[Any], ...]
    _conversions: tuple[tuple[int, str, Callable[[Any], Any]], ...] | None = None

    def conversions(
        self, cursor: psycopg.Cursor[Any]
    ) -> tuple[tuple[int, str, Callable[[Any], Any]], ...]:
        """The columns a type converts (an enum from its string, say), as SQLAlchemy's
        result processors would: (position, attribute, conversion), found once, from
        the first answer's column types. Most columns need none."""
        if self._conversions is None:
            assert cursor.description is not None  # noqa: S101 - a SELECT
            found = []
            for index, (column, described) in enumerate(
                zip(self.columns, cursor.description, strict=False)
            ):
                convert = column.type.dialect_impl(self.dialect).result_processor(
                    self.dialect, described.type_code
                )
                if convert is not None:
                    found.append((index, self.keys[index], convert))
            self._conversions = tuple(found)
        return self._conversions


@functools.cache
def _driver_query(model: type[WorkItem], dialect: sa.Dialect) -> _DriverQuery | None:
    """None for a model whose load is more than its table columns (column
    expressions, deferred or eagerly loaded attributes, subclasses): the ORM
    loads those."""
    mapper = sa.inspect(model)
    properties = list(mapper.column_attrs)
    columns = [
        column
        for prop in properties
        if not prop.deferred
        and isinstance(column := prop.columns[0], sa.Column)
        and column.table in mapper.tables
    ]
    plain = (
        len(columns) == len(properties)
        and len(list(mapper.self_and_descendants)) == 1
        and all(
            relationship.lazy in ("select", "raise", "raise_on_sql", "noload")
            for relationship in mapper.relationships
        )
    )
    if not plain:
        return None
    id_column = mapper.primary_key[0]
    events, dimension_rows, ids = _step_columns(id_column)
    statement = (
        sa.select(*columns, sa.func.now(), events, dimension_rows)
        .select_from(mapper.selectable)
        .where(id_column == sa.any_(ids))
    )
    params = {}
    if mapper.single and mapper.polymorphic_on is not None:
        # As the ORM reads a subclass that shares its table: its rows only.
        params["item_type"] = mapper.polymorphic_identity
        statement = statement.where(mapper.polymorphic_on == sa.bindparam("item_type"))
    return _DriverQuery(
        mapper,
        str(statement.compile(dialect=dialect)),
        tuple(prop.key for prop in properties),
        params,
        dialect,
        tuple(columns),
    )


def _manufacture(
    session: Session,
    mapper: Mapper[Any],
    keys: tuple[str, ...],
    conversions: tuple[tuple[int, str, Callable[[Any], Any]], ...],
    row: Sequence[Any],
) -> WorkItem:
    """The item of `row`, persistent in `session` as if the ORM had loaded it: no
    history, its identity key set (`make_transient_to_detached`, SQLAlchemy's way of
    making an object loaded without SQL), then attached."""
    item: WorkItem = mapper.class_manager.new_instance()
    values = instance_dict(item)
    values.update(zip(keys, row, strict=False))  # the item's columns come first
    for index, key, convert in conversions:
        values[key] = convert(row[index])
    make_transient_to_detached(item)
    session.add(item)
    return item


# The events a batch consumed go in the same statement as its dimension rows:
# different tables, so neither part can see or miss the other's effect. The
# items' own changes are flushed first, so a step that ended its item (an event
# deferring a check, then the executor completing it) writes no deferral: the
# trigger that clears them (migration 0009) ran before these rows were written.
_WRITE_STEP_ROWS = (
    "WITH consumed AS (DELETE FROM pending_events WHERE id = ANY(%s::bigint[])) "
    "INSERT INTO work_item_statuses (work_item_id, dimension, variant, status, pending_until) "
    "SELECT row.id, row.dimension, row.variant, row.status, "
    "  CASE WHEN item.phase = 'active' THEN row.pending_until END "
    "FROM unnest(%s::uuid[], %s::text[], %s::text[], %s::text[], %s::timestamptz[]) "
    "  AS row(id, dimension, variant, status, pending_until) "
    "JOIN work_items AS item ON item.id = row.id "
    "ON CONFLICT (work_item_id, dimension, variant) DO UPDATE SET "
    "  status = excluded.status, pending_until = excluded.pending_until, updated_at = now()"
)


def write_step_rows(
    session: Session,
    updates: Iterable[tuple[uuid.UUID, DimensionUpdate]],
    consumed_events: Sequence[int],
) -> None:
    """Upsert the dimension rows a batch changed (last update of a row wins) and drop
    the events it consumed, in one statement."""
    latest: dict[tuple[uuid.UUID, str, str], DimensionUpdate] = {}
    for item_id, update in updates:
        latest[(item_id, update.dimension, update.variant)] = update
    if not latest and not consumed_events:
        return
    driver_connection(session).execute(
        _WRITE_STEP_ROWS,
        (
            "{" + ",".join(str(int(event_id)) for event_id in consumed_events) + "}",
            pg_arrays.uuids(item_id for item_id, _, _ in latest),
            pg_arrays.texts(dimension for _, dimension, _ in latest),
            pg_arrays.texts(variant for _, _, variant in latest),
            pg_arrays.texts(update.status.value for update in latest.values()),
            pg_arrays.timestamps(update.pending_until for update in latest.values()),
        ),
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
