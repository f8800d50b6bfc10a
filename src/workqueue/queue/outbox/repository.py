"""All SQL of the outbox: writing events, claiming them for delivery, recording outcomes.

Nothing here commits. Delivery attempts hold their row's lock (FOR UPDATE SKIP
LOCKED) for the length of the HTTP call, so two replicas never send one row
at the same time; outcome times use `clock_timestamp()` because the
transaction's `now()` is as old as the call's start.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Session

from workqueue.queue.outbox.models import DeliveryStatus

OUTBOX_CHANNEL = "workqueue_outbox"

# One round trip. The empty payload lets PostgreSQL fold every emit of a
# transaction into a single notification, sent on commit (never on rollback).
_INSERT_SQL = sa.text(
    "WITH inserted AS ("
    "  INSERT INTO outbox_deliveries (event_id, subscriber, event_type, work_item_id, data) "
    "  SELECT :event_id, name, :event_type, :work_item_id, CAST(:data AS jsonb) "
    "  FROM unnest(CAST(:subscribers AS text[])) AS name RETURNING 1"
    ") SELECT pg_notify(:channel, '')"
)


@dataclass(frozen=True, slots=True)
class DueDelivery:
    """A pending row this transaction holds locked while it delivers it."""

    id: int
    event_id: uuid.UUID
    subscriber: str
    event_type: str
    data: dict[str, Any]
    created_at: datetime
    attempts: int
    work_item_id: uuid.UUID | None


@dataclass(frozen=True, slots=True)
class AttemptOutcome:
    status: DeliveryStatus
    retry_in_seconds: float | None  # None once abandoned


def insert_deliveries(
    session: Session,
    *,
    event_id: uuid.UUID,
    event_type: str,
    work_item_id: uuid.UUID | None,
    data_json: str,
    subscribers: Sequence[str],
) -> None:
    """One pending row per subscriber, and a wake-up for the delivery workers on commit."""
    session.execute(
        _INSERT_SQL,
        {
            "event_id": event_id,
            "event_type": event_type,
            "work_item_id": work_item_id,
            "data": data_json,
            "subscribers": list(subscribers),
            "channel": OUTBOX_CHANNEL,
        },
    )


def claim_due(session: Session) -> DueDelivery | None:
    """Lock the longest-due pending row that no other transaction is delivering."""
    row = session.execute(
        sa.text(
            "SELECT id, event_id, subscriber, event_type, data, created_at, attempts, "
            "  work_item_id "
            "FROM outbox_deliveries "
            "WHERE status = 'pending' AND next_attempt_at <= now() "
            "ORDER BY next_attempt_at LIMIT 1 "
            "FOR UPDATE SKIP LOCKED"
        )
    ).first()
    if row is None:
        return None
    return DueDelivery(
        row.id,
        row.event_id,
        row.subscriber,
        row.event_type,
        row.data,
        row.created_at,
        row.attempts,
        row.work_item_id,
    )


def mark_delivered(session: Session, delivery_id: int) -> None:
    session.execute(
        sa.text(
            "UPDATE outbox_deliveries SET status = 'delivered', attempts = attempts + 1, "
            "  delivered_at = clock_timestamp() "
            "WHERE id = :id"
        ),
        {"id": delivery_id},
    )


def abandon(session: Session, delivery_id: int, *, error: str) -> None:
    """Give up on a row at once (its subscriber is no longer configured)."""
    session.execute(
        sa.text(
            "UPDATE outbox_deliveries SET status = 'abandoned', last_error = :error, "
            "  abandoned_at = clock_timestamp() "
            "WHERE id = :id"
        ),
        {"id": delivery_id, "error": error},
    )


def record_failed_attempt(
    session: Session,
    delivery_id: int,
    *,
    error: str,
    max_age_seconds: float,
    backoff_initial_seconds: float,
    backoff_max_seconds: float,
) -> AttemptOutcome:
    """Back off exponentially, but never past the row's deadline; at the deadline, give up.

    The last retry is moved up to the deadline itself, so a subscriber gets
    every chance within max_age_seconds.
    """
    row = session.execute(
        sa.text(
            "UPDATE outbox_deliveries SET attempts = attempts + 1, last_error = :error, "
            "  status = CASE WHEN clock_timestamp() >= deadline THEN 'abandoned' "
            "           ELSE 'pending' END, "
            "  abandoned_at = CASE WHEN clock_timestamp() >= deadline "
            "                 THEN clock_timestamp() END, "
            "  next_attempt_at = least(deadline, clock_timestamp() + make_interval(secs => "
            "    least(:backoff_initial * power(2, attempts), :backoff_max))) "
            "FROM (SELECT created_at + make_interval(secs => :max_age) AS deadline "
            "      FROM outbox_deliveries WHERE id = :id) AS due "
            "WHERE id = :id "
            "RETURNING status, "
            "  extract(epoch FROM next_attempt_at - clock_timestamp())::float AS retry_in"
        ),
        {
            "id": delivery_id,
            "error": error,
            "max_age": max_age_seconds,
            "backoff_initial": backoff_initial_seconds,
            "backoff_max": backoff_max_seconds,
        },
    ).one()
    status = DeliveryStatus(row.status)
    retry_in = None if status is DeliveryStatus.ABANDONED else max(row.retry_in, 0.0)
    return AttemptOutcome(status, retry_in)


def seconds_until_due(session: Session) -> float | None:
    """Seconds until the earliest pending row not being delivered right now; None if none.

    Rows locked by a delivery in flight are skipped: whoever holds them sets
    its own timer for their retry.
    """
    seconds: float | None = session.execute(
        sa.text(
            "SELECT extract(epoch FROM next_attempt_at - now())::float FROM outbox_deliveries "
            "WHERE status = 'pending' ORDER BY next_attempt_at LIMIT 1 "
            "FOR KEY SHARE SKIP LOCKED"
        )
    ).scalar()
    return seconds


def prune_delivered_older_than(session: Session, seconds: float) -> int:
    """Forget rows delivered more than `seconds` ago; abandoned rows stay for inspection."""
    deleted: int = session.execute(
        sa.text(
            "WITH gone AS ("
            "  DELETE FROM outbox_deliveries WHERE status = 'delivered' "
            "  AND delivered_at < now() - make_interval(secs => :seconds) RETURNING 1"
            ") SELECT count(*) FROM gone"
        ),
        {"seconds": seconds},
    ).scalar_one()
    return deleted
