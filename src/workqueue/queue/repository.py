"""All SQL of the generic engine.

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
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.orm import Session

from workqueue.queue.dimensions import DimensionState, DimensionUpdate
from workqueue.queue.models import (
    DimensionStatus,
    PendingEvent,
    Phase,
    WorkItem,
    WorkItemStatus,
)

WAKE_CHANNEL = "workqueue_wake"
_SIGNED_63_BITS = 0x7FFF_FFFF_FFFF_FFFF


@dataclass(frozen=True, slots=True)
class Claim:
    """A lease on one item, held by this process until released or lost."""

    item_id: uuid.UUID
    item_type: str
    lease_token: uuid.UUID


@dataclass(frozen=True, slots=True)
class FailureOutcome:
    attempts: int
    phase: Phase
    next_attempt_at: datetime | None


def advisory_lock_key(item_id: uuid.UUID) -> int:
    """The per-item advisory lock key: the UUID's low 63 bits (collisions: ~2^-63)."""
    return item_id.int & _SIGNED_63_BITS


def lock_item(session: Session, item_id: uuid.UUID) -> None:
    session.execute(
        sa.text("SELECT pg_advisory_xact_lock(:key)"), {"key": advisory_lock_key(item_id)}
    )


def database_now(session: Session) -> datetime:
    now: datetime = session.execute(sa.text("SELECT now()")).scalar_one()
    return now


# -- enqueueing work ----------------------------------------------------------


def mark_actionable(session: Session, item_id: uuid.UUID, item_type: str) -> None:
    """Flag an item as having work and wake whichever replica handles it."""
    lock_item(session, item_id)
    session.execute(
        sa.text(
            "UPDATE work_items SET actionable = true, updated_at = clock_timestamp() WHERE id = :id"
        ),
        {"id": item_id},
    )
    notify_wake(session, item_type, item_id)


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
    """Store a raw event for an item's loop; False when `dedupe_key` was seen before."""
    lock_item(session, item_id)
    inserted = session.execute(
        insert(PendingEvent)
        .values(work_item_id=item_id, event_type=event_type, body=body, dedupe_key=dedupe_key)
        .on_conflict_do_nothing(index_elements=["dedupe_key"])
        .returning(PendingEvent.id)
    ).first()
    if inserted is None:
        return False
    mark_actionable(session, item_id, item_type)
    return True


# -- claiming and leases -----------------------------------------------------

_CLAIM_SQL = """
WITH due AS (
    SELECT id FROM work_items
    WHERE actionable
      AND item_type = ANY(:item_types)
      AND (next_attempt_at IS NULL OR next_attempt_at <= now())
      AND (leased_until IS NULL OR leased_until < now())
      {only_ids}
    ORDER BY updated_at
    LIMIT :limit
    FOR UPDATE SKIP LOCKED
)
UPDATE work_items AS item
SET leased_until = now() + make_interval(secs => :lease_seconds),
    lease_token = gen_random_uuid()
FROM due
WHERE item.id = due.id
RETURNING item.id, item.item_type, item.lease_token
"""


def claim_due_items(
    session: Session,
    *,
    item_types: Collection[str],
    limit: int,
    lease_seconds: float,
    only_ids: Collection[uuid.UUID] | None = None,
) -> list[Claim]:
    """Lease up to `limit` due actionable items (optionally among `only_ids`)."""
    if limit <= 0 or not item_types:
        return []
    params: dict[str, Any] = {
        "item_types": list(item_types),
        "limit": limit,
        "lease_seconds": lease_seconds,
    }
    only = ""
    if only_ids is not None:
        only = "AND id = ANY(:ids)"
        params["ids"] = list(only_ids)
    rows = session.execute(sa.text(_CLAIM_SQL.format(only_ids=only)), params).all()
    return [Claim(row.id, row.item_type, row.lease_token) for row in rows]


def extend_leases(
    session: Session, claims: Sequence[Claim], lease_seconds: float
) -> set[uuid.UUID]:
    """Heartbeat: extend every lease still held; returns the ids whose lease is still ours."""
    if not claims:
        return set()
    rows = session.execute(
        sa.text(
            "UPDATE work_items AS item "
            "SET leased_until = now() + make_interval(secs => :lease_seconds) "
            "FROM unnest(CAST(:ids AS uuid[]), CAST(:tokens AS uuid[])) AS held(id, token) "
            "WHERE item.id = held.id AND item.lease_token = held.token "
            "RETURNING item.id"
        ),
        {
            "lease_seconds": lease_seconds,
            "ids": [claim.item_id for claim in claims],
            "tokens": [claim.lease_token for claim in claims],
        },
    ).all()
    return {row.id for row in rows}


def finish_step(
    session: Session,
    claim: Claim,
    *,
    idle: bool,
    action_succeeded: bool,
    lease_seconds: float,
) -> bool:
    """Write the outcome of one processing step, fenced on the lease token.

    `idle` ends the claim: the item is no longer actionable and its lease is
    released. Otherwise the lease is extended for the next step. Returns False
    when the lease is no longer ours, in which case nothing may be committed.
    """
    result = session.execute(
        sa.text(
            "UPDATE work_items SET "
            "  actionable = CASE WHEN :idle THEN false ELSE actionable END, "
            "  leased_until = CASE WHEN :idle THEN NULL "
            "                 ELSE now() + make_interval(secs => :lease_seconds) END, "
            "  lease_token = CASE WHEN :idle THEN NULL ELSE lease_token END, "
            "  attempts = CASE WHEN :succeeded THEN 0 ELSE attempts END, "
            "  error = CASE WHEN :succeeded THEN NULL ELSE error END, "
            "  next_attempt_at = CASE WHEN :succeeded THEN NULL ELSE next_attempt_at END, "
            "  updated_at = CASE WHEN :succeeded OR :idle THEN now() ELSE updated_at END "
            "WHERE id = :id AND lease_token = :token "
            "RETURNING id"
        ),
        {
            "idle": idle,
            "succeeded": action_succeeded,
            "lease_seconds": lease_seconds,
            "id": claim.item_id,
            "token": claim.lease_token,
        },
    ).first()
    return result is not None


def release_lease(session: Session, claim: Claim) -> bool:
    """Give the item back without changing it (shutdown, deadline); it stays actionable."""
    result = session.execute(
        sa.text(
            "UPDATE work_items SET leased_until = NULL, lease_token = NULL "
            "WHERE id = :id AND lease_token = :token RETURNING id"
        ),
        {"id": claim.item_id, "token": claim.lease_token},
    ).first()
    return result is not None


def record_failure(
    session: Session,
    claim: Claim,
    *,
    error: str,
    permanent: bool,
    max_attempts: int,
    backoff_initial_seconds: float,
    backoff_max_seconds: float,
) -> FailureOutcome | None:
    """Count a failed action: back off, or fail the item; None when the lease was lost.

    `attempts` counts consecutive failures (DDR-14). The delay before the next
    attempt doubles from `backoff_initial_seconds` up to `backoff_max_seconds`.
    """
    row = session.execute(
        sa.text(
            "UPDATE work_items SET "
            "  attempts = attempts + 1, "
            "  error = :error, "
            "  phase = CASE WHEN :permanent OR attempts + 1 >= :max_attempts "
            "          THEN 'failed' ELSE phase END, "
            "  actionable = NOT (:permanent OR attempts + 1 >= :max_attempts), "
            "  next_attempt_at = CASE WHEN :permanent OR attempts + 1 >= :max_attempts "
            "    THEN NULL ELSE now() + make_interval(secs => least("
            "      :backoff_initial * power(2, attempts), :backoff_max)) END, "
            "  leased_until = NULL, lease_token = NULL, updated_at = now() "
            "WHERE id = :id AND lease_token = :token "
            "RETURNING attempts, phase, next_attempt_at"
        ),
        {
            "error": error,
            "permanent": permanent,
            "max_attempts": max_attempts,
            "backoff_initial": backoff_initial_seconds,
            "backoff_max": backoff_max_seconds,
            "id": claim.item_id,
            "token": claim.lease_token,
        },
    ).first()
    if row is None:
        return None
    return FailureOutcome(row.attempts, Phase(row.phase), row.next_attempt_at)


# -- reading one item's state -------------------------------------------------


def load_item(session: Session, item_id: uuid.UUID) -> WorkItem | None:
    return session.get(WorkItem, item_id, populate_existing=True)


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


def upsert_dimension(
    session: Session, item_id: uuid.UUID, update: DimensionUpdate
) -> dict[str, Any] | None:
    """Set one dimension row; returns its previous state (None if there was no row)."""
    previous = session.execute(
        sa.select(WorkItemStatus.status, WorkItemStatus.pending_until).where(
            WorkItemStatus.work_item_id == item_id,
            WorkItemStatus.dimension == update.dimension,
            WorkItemStatus.variant == update.variant,
        )
    ).first()
    statement = insert(WorkItemStatus).values(
        work_item_id=item_id,
        dimension=update.dimension,
        variant=update.variant,
        status=update.status,
        pending_until=update.pending_until,
    )
    session.execute(
        statement.on_conflict_do_update(
            index_elements=["work_item_id", "dimension", "variant"],
            set_={
                "status": statement.excluded.status,
                "pending_until": statement.excluded.pending_until,
                "updated_at": sa.func.now(),
            },
        )
    )
    if previous is None:
        return None
    return {"status": str(previous.status), "pending_until": previous.pending_until}


def pending_events(session: Session, item_id: uuid.UUID) -> list[PendingEvent]:
    return list(
        session.scalars(
            sa.select(PendingEvent)
            .where(PendingEvent.work_item_id == item_id)
            .order_by(PendingEvent.id)
        )
    )


def delete_events(session: Session, event_ids: Sequence[int]) -> None:
    if event_ids:
        session.execute(sa.delete(PendingEvent).where(PendingEvent.id.in_(event_ids)))


def idle_check(session: Session, item_id: uuid.UUID) -> tuple[datetime, bool] | None:
    """`updated_at` and whether events are waiting; read under the item lock before idling."""
    row = session.execute(
        sa.text(
            "SELECT updated_at, EXISTS (SELECT 1 FROM pending_events WHERE work_item_id = :id) "
            "AS has_events FROM work_items WHERE id = :id"
        ),
        {"id": item_id},
    ).first()
    return None if row is None else (row.updated_at, row.has_events)


# -- wake-ups: deferrals, recovery, the timer ----------------------------------


def wake_due_deferrals(
    session: Session, item_types: Collection[str]
) -> list[tuple[uuid.UUID, str]]:
    """Deferrals whose `pending_until` passed: clear it and make their items actionable."""
    rows = session.execute(
        sa.text(
            "SELECT DISTINCT item.id, item.item_type FROM work_item_statuses AS status "
            "JOIN work_items AS item ON item.id = status.work_item_id "
            "WHERE status.pending_until <= now() AND item.item_type = ANY(:item_types) "
            "  AND item.phase = 'active' "
            "ORDER BY item.id"
        ),
        {"item_types": list(item_types)},
    ).all()
    woken = [(row.id, row.item_type) for row in rows]
    for item_id, item_type in woken:
        mark_actionable(session, item_id, item_type)
        session.execute(
            sa.text(
                "UPDATE work_item_statuses SET pending_until = NULL, updated_at = now() "
                "WHERE work_item_id = :id AND pending_until <= now()"
            ),
            {"id": item_id},
        )
    return woken


def wake_items_with_events(
    session: Session, item_types: Collection[str]
) -> list[tuple[uuid.UUID, str]]:
    """Recovery (DDR-35): items holding pending events that are not flagged actionable."""
    rows = session.execute(
        sa.text(
            "SELECT DISTINCT item.id, item.item_type FROM pending_events AS event "
            "JOIN work_items AS item ON item.id = event.work_item_id "
            "WHERE NOT item.actionable AND item.item_type = ANY(:item_types) "
            "ORDER BY item.id"
        ),
        {"item_types": list(item_types)},
    ).all()
    woken = [(row.id, row.item_type) for row in rows]
    for item_id, item_type in woken:
        mark_actionable(session, item_id, item_type)
    return woken


def next_due_time(session: Session, item_types: Collection[str]) -> datetime | None:
    """The earliest moment something becomes due: backoff, lease expiry or deferral."""
    due: datetime | None = session.execute(
        sa.text(
            "SELECT least("
            "  (SELECT min(coalesce(greatest(next_attempt_at, leased_until), now())) "
            "   FROM work_items WHERE actionable AND item_type = ANY(:item_types)), "
            "  (SELECT min(status.pending_until) FROM work_item_statuses AS status "
            "   JOIN work_items AS item ON item.id = status.work_item_id "
            "   WHERE status.pending_until IS NOT NULL AND item.phase = 'active' "
            "     AND item.item_type = ANY(:item_types)))"
        ),
        {"item_types": list(item_types)},
    ).scalar_one()
    return due
