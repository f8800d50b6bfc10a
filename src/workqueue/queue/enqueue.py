"""The SQL of enqueueing work and waking items: the engine's lock protocol (DDR-34).

Claims and leases are in `lease_repository`, a step's reads and outcome writes
in `step_repository`.

Conventions:

* Nothing here commits; the caller's boundary (a processing step, a request,
  a CLI command) does.
* The database clock (`now()`) is the only clock for leases and due times, so
  replicas on different hosts agree on them.
* Anything that makes an item actionable first takes the item's transaction
  advisory lock (DDR-34). The processing loop decides to go idle under the
  same lock, so work enqueued concurrently is either seen by that decision or
  lands after it and wakes the item again: it is never stranded.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg
import sqlalchemy as sa
from psycopg.types.json import Jsonb
from sqlalchemy.orm import Session

from workqueue.queue import pg_arrays
from workqueue.queue.dimensions import DimensionState, DimensionUpdate
from workqueue.queue.models import (
    DimensionStatus,
    Phase,
    WorkItemStatus,
)
from workqueue.queue.outbox import emit as outbox

WAKE_CHANNEL = "workqueue_wake"
_SIGNED_63_BITS = 0x7FFF_FFFF_FFFF_FFFF


def advisory_lock_key(item_id: uuid.UUID) -> int:
    """The per-item advisory lock key: the UUID's low 63 bits (collisions: ~2^-63)."""
    return item_id.int & _SIGNED_63_BITS


def lock_item(session: Session, item_id: uuid.UUID) -> None:
    """Take the item's transaction-scoped advisory lock (held until commit or rollback)."""
    driver_connection(session).execute(
        "SELECT pg_advisory_xact_lock(%s)", (advisory_lock_key(item_id),)
    )


def lock_items(session: Session, item_ids: Sequence[uuid.UUID]) -> None:
    """`lock_item` for each id, one statement, taken in the order given.

    Callers that hold several items' locks sort them by `advisory_lock_key` first,
    as `lock_item`'s callers do one at a time, so two of them cannot deadlock.
    """
    driver_connection(session).execute(
        "SELECT count(pg_advisory_xact_lock(key)) FROM (SELECT key FROM "
        "unnest(%s::bigint[]) WITH ORDINALITY AS given(key, n) ORDER BY n) AS keys",
        ([advisory_lock_key(item_id) for item_id in item_ids],),
    )


def database_now(session: Session) -> datetime:
    now: datetime = session.execute(sa.text("SELECT now()")).scalar_one()
    return now


def driver_connection(session: Session) -> psycopg.Connection[Any]:
    """The psycopg connection under the session's transaction.

    The engine's per-step statements go straight to the driver: SQLAlchemy's
    per-statement overhead is several times the cost of these statements, and
    under the GIL that overhead is what limits throughput.
    """
    connection = session.connection().connection.driver_connection
    if not isinstance(connection, psycopg.Connection):  # pragma: no cover - engine is psycopg
        raise TypeError("the workqueue engine needs the psycopg driver")
    return connection


# -- enqueueing work ----------------------------------------------------------


def mark_actionable(
    session: Session, item_id: uuid.UUID, item_type: str, *, reactivate: bool = False
) -> None:
    """Flag an item as having work and wake whichever replica handles it.

    Takes the item's advisory lock, then bumps `updated_at`: the processing
    loop's idle decision (`go_idle`) checks both, so this work cannot be
    stranded. Call it after the type-specific writes of the same transaction.
    `reactivate` also returns a failed or cancelled item to `active` with a
    clean slate (attempts, error, backoff).
    """
    lock_item(session, item_id)
    session.execute(
        sa.text(
            "UPDATE work_items SET actionable = true, updated_at = clock_timestamp(), "
            "  phase = CASE WHEN :reactivate THEN 'active' ELSE phase END, "
            "  attempts = CASE WHEN :reactivate THEN 0 ELSE attempts END, "
            "  error = CASE WHEN :reactivate THEN NULL ELSE error END, "
            "  next_attempt_at = CASE WHEN :reactivate THEN NULL ELSE next_attempt_at END "
            "WHERE id = :id"
        ),
        {"id": item_id, "reactivate": reactivate},
    )
    notify_wake(session, item_type, item_id)


def cancel_item(session: Session, item_id: uuid.UUID) -> None:
    """Move an item to `cancelled` and announce it; its loop, if running, finds nothing to do."""
    row = session.execute(
        sa.text(
            "UPDATE work_items SET phase = 'cancelled', updated_at = clock_timestamp() "
            "WHERE id = :id AND phase <> 'cancelled' RETURNING item_type, project_path"
        ),
        {"id": item_id},
    ).first()
    if row is not None:
        outbox.emit_phase_reached(
            session,
            Phase.CANCELLED,
            work_item_id=item_id,
            item_type=row.item_type,
            project=row.project_path,
        )


def notify_wake(session: Session, item_type: str, item_id: uuid.UUID) -> None:
    """Queue a NOTIFY, delivered to every listening replica when the transaction commits."""
    session.execute(
        sa.text("SELECT pg_notify(:channel, :payload)"),
        {"channel": WAKE_CHANNEL, "payload": f"{item_type}:{item_id}"},
    )


def insert_pending_event(
    session: Session,
    *,
    item_id: uuid.UUID,
    item_type: str,
    event_type: str,
    body: dict[str, Any],
    dedupe_key: str | None = None,
) -> bool:
    """Store a raw event for an item's loop; False when `dedupe_key` was seen before.

    Under the item's advisory lock (DDR-34): `go_idle` checks for waiting
    events under the same lock, so this event is either seen by that check or
    finds the item idle and wakes it. The item row is only touched when the
    item is idle: a running step may hold that row for the length of a GitLab
    call, and the event must not wait for it (nor take locks in the opposite
    order and deadlock with `go_idle`).
    """
    driver = driver_connection(session)
    driver.execute("SELECT pg_advisory_xact_lock(%s)", (advisory_lock_key(item_id),))
    inserted = driver.execute(
        "INSERT INTO pending_events (work_item_id, event_type, body, dedupe_key) "
        "VALUES (%s, %s, %s, %s) ON CONFLICT (dedupe_key) DO NOTHING RETURNING id",
        (item_id, event_type, Jsonb(body), dedupe_key),
    ).fetchone()
    if inserted is None:
        return False
    driver.execute(
        "UPDATE work_items SET actionable = true, updated_at = clock_timestamp() "
        "WHERE id = %s AND NOT actionable",
        (item_id,),
    )
    driver.execute("SELECT pg_notify(%s, %s)", (WAKE_CHANNEL, f"{item_type}:{item_id}"))
    return True


# Many events in one statement, for items whose advisory locks the caller
# holds (`insert_pending_events`). Rows keep the order given, so one item's
# events keep their arrival order in `pending_events.id`. A row whose
# `dedupe_key` was stored before (or earlier in the list) is skipped. As in
# `insert_pending_event`, only idle items' rows are touched, and each item
# that got an event is announced once.
_INSERT_PENDING_EVENTS_SQL = f"""
WITH given AS (
    SELECT * FROM unnest(
        CAST(%(item_ids)s AS uuid[]), CAST(%(item_types)s AS text[]),
        CAST(%(event_types)s AS text[]), CAST(%(bodies)s AS text[]),
        CAST(%(dedupe_keys)s AS text[])
    ) WITH ORDINALITY AS event(work_item_id, item_type, event_type, body, dedupe_key, n)
), inserted AS (
    INSERT INTO pending_events (work_item_id, event_type, body, dedupe_key)
    SELECT work_item_id, event_type, CAST(body AS jsonb), dedupe_key FROM given ORDER BY n
    ON CONFLICT (dedupe_key) DO NOTHING
    RETURNING work_item_id
), woken AS (
    SELECT DISTINCT inserted.work_item_id, given.item_type
    FROM inserted JOIN given USING (work_item_id)
), marked AS (
    UPDATE work_items SET actionable = true, updated_at = clock_timestamp()
    FROM woken WHERE work_items.id = woken.work_item_id AND NOT work_items.actionable
)
SELECT work_item_id, pg_notify('{WAKE_CHANNEL}', item_type || ':' || work_item_id) FROM woken
"""


# Body characters per statement of `insert_pending_events`. A hook's body is
# stored once per item it concerns, and PostgreSQL refuses a message over
# 1 GB (closing the connection): a batch of large hooks that each concern many
# items must not become one statement, nor one string that size in memory.
PENDING_EVENT_BODIES_PER_STATEMENT = 8 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class NewPendingEvent:
    """One event to store for one item; `body_json` is JSONB-safe JSON text."""

    item_id: uuid.UUID
    item_type: str
    event_type: str
    body_json: str
    dedupe_key: str | None


def insert_pending_events(session: Session, events: Sequence[NewPendingEvent]) -> set[uuid.UUID]:
    """`insert_pending_event` for many events; returns the items that got a new event.

    Takes every item's advisory lock first, in one statement and in the order of
    `events` (callers sort by `advisory_lock_key`, stably, so concurrent callers
    cannot deadlock), then stores them in order, in one statement per
    `PENDING_EVENT_BODIES_PER_STATEMENT` characters of bodies.
    """
    if not events:
        return set()
    lock_items(session, list(dict.fromkeys(event.item_id for event in events)))
    stored: set[uuid.UUID] = set()
    for chunk in _by_body_size(events, PENDING_EVENT_BODIES_PER_STATEMENT):
        params = {
            "item_ids": pg_arrays.uuids(event.item_id for event in chunk),
            "item_types": pg_arrays.texts(event.item_type for event in chunk),
            "event_types": pg_arrays.texts(event.event_type for event in chunk),
            "bodies": pg_arrays.texts(event.body_json for event in chunk),
            "dedupe_keys": pg_arrays.texts(event.dedupe_key for event in chunk),
        }
        rows = driver_connection(session).execute(_INSERT_PENDING_EVENTS_SQL, params)
        stored.update(row[0] for row in rows)
    return stored


def _by_body_size(events: Sequence[NewPendingEvent], limit: int) -> list[Sequence[NewPendingEvent]]:
    """`events` in order, cut so that each part's bodies come to at most `limit`
    characters (a single larger body goes alone)."""
    parts: list[Sequence[NewPendingEvent]] = []
    start, size = 0, 0
    for index, event in enumerate(events):
        if index > start and size + len(event.body_json) > limit:
            parts.append(events[start:index])
            start, size = index, 0
        size += len(event.body_json)
    parts.append(events[start:])
    return parts


# -- reading one item's state -------------------------------------------------


def load_dimensions(session: Session, item_id: uuid.UUID) -> list[DimensionState]:
    rows = session.execute(
        sa.select(
            WorkItemStatus.dimension,
            WorkItemStatus.variant,
            WorkItemStatus.status,
            WorkItemStatus.pending_until,
        ).where(WorkItemStatus.work_item_id == item_id)
    ).all()
    return [DimensionState(row[0], row[1], DimensionStatus(row[2]), row[3]) for row in rows]


_UPSERT_DIMENSION = (
    "INSERT INTO work_item_statuses (work_item_id, dimension, variant, status, pending_until) "
    "VALUES (%s, %s, %s, %s, %s) "
    "ON CONFLICT (work_item_id, dimension, variant) DO UPDATE SET "
    "  status = excluded.status, pending_until = excluded.pending_until, updated_at = now()"
)


def upsert_dimension(session: Session, item_id: uuid.UUID, update: DimensionUpdate) -> None:
    """Insert or overwrite one dimension row."""
    driver_connection(session).execute(
        _UPSERT_DIMENSION,
        (item_id, update.dimension, update.variant, update.status.value, update.pending_until),
    )


def mark_actionable_many(session: Session, items: Sequence[tuple[uuid.UUID, str]]) -> None:
    """`mark_actionable` for a batch, in a constant number of statements.

    Same protocol (DDR-34): each item's advisory lock first, taken in lock-key
    order like the event ingestion (so two multi-item lockers cannot
    deadlock), then `actionable` and the `updated_at` witness, then a NOTIFY
    per item. Locks are held until the batch's commit: keep batches bounded.
    """
    if not items:
        return
    ids = [item_id for item_id, _ in items]
    session.execute(
        sa.text(
            "SELECT count(pg_advisory_xact_lock(key)) FROM ("
            "  SELECT workqueue_item_lock_key(id) AS key "
            "  FROM unnest(CAST(:ids AS uuid[])) AS id ORDER BY 1"
            ") AS keys"
        ),
        {"ids": ids},
    )
    session.execute(
        sa.text(
            "UPDATE work_items SET actionable = true, updated_at = clock_timestamp() "
            "WHERE id = ANY(:ids)"
        ),
        {"ids": ids},
    )
    session.execute(
        sa.text(
            "SELECT count(pg_notify(:channel, item_type || ':' || id::text)) "
            "FROM unnest(CAST(:ids AS uuid[]), CAST(:types AS text[])) AS woken(id, item_type)"
        ),
        {"channel": WAKE_CHANNEL, "ids": ids, "types": [item_type for _, item_type in items]},
    )
