"""SQL of the delivery intake (`incoming_deliveries`): store, claim in batches, forget.

Straight to the driver (one parameter style, `%s`): storing a delivery is the
webhook's whole answer, and the ORM's per-statement overhead would be most of
its cost.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import psycopg
from sqlalchemy.orm import Session

from workqueue.queue import pg_arrays

INTAKE_CHANNEL = "workqueue_intake"  # NOTIFY'd when a delivery is stored; no payload

# The de-duplication records and the stored deliveries in one statement, for
# one delivery or many (the webhook receiver batches concurrent requests). A
# concurrent insert of the same key waits for the other transaction, so exactly
# one of them stores the delivery. Each distinct new key is recorded once and
# the first delivery carrying it (by `ordinal`) is stored; deliveries without a
# key are always stored. Returns the ordinals stored. PostgreSQL folds the
# identical NOTIFYs of one transaction into one, sent on commit.
_STORE_MANY_SQL = """
WITH incoming AS (
    SELECT * FROM unnest(
        CAST(%(ordinals)s AS int[]), CAST(%(keys)s AS text[]), CAST(%(sources)s AS text[]),
        CAST(%(event_types)s AS text[]), CAST(%(bodies)s AS text[])
    ) AS delivery(ordinal, delivery_key, source, event_type, body)
), first_of_key AS (
    SELECT DISTINCT ON (delivery_key) * FROM incoming
    WHERE delivery_key IS NOT NULL
    ORDER BY delivery_key, ordinal
), recorded AS (
    INSERT INTO received_deliveries (delivery_key, source, event_type)
    SELECT delivery_key, source, event_type FROM first_of_key
    ON CONFLICT (delivery_key) DO NOTHING
    RETURNING delivery_key
), chosen AS (
    SELECT first_of_key.* FROM first_of_key JOIN recorded USING (delivery_key)
    UNION ALL
    SELECT * FROM incoming WHERE delivery_key IS NULL
), stored AS (
    INSERT INTO incoming_deliveries (delivery_key, source, event_type, body)
    SELECT delivery_key, source, event_type, CAST(body AS jsonb) FROM chosen ORDER BY ordinal
)
SELECT ordinal, pg_notify('{channel}', '') FROM chosen
""".replace("{channel}", INTAKE_CHANNEL)

# A delivery stored for a later round by the resolver itself: no de-duplication
# record and no NOTIFY, so the resolver that keeps it does not wake itself into
# a loop; its next round (the next delivery, or the safety sweep) takes it.
_STORE_QUIETLY_SQL = """
INSERT INTO incoming_deliveries (delivery_key, source, event_type, body)
VALUES (%s, %s, %s, CAST(%s AS jsonb))
"""

# Claiming deletes: the rows stay locked by this transaction until it ends,
# and come back unresolved if it rolls back or its replica dies before
# committing, so claim and forget are one statement. Rows another replica is
# resolving are skipped. ARRAY(...) runs the locking subquery once.
_CLAIM_SQL = """
DELETE FROM incoming_deliveries
WHERE id = ANY(ARRAY(
    SELECT id FROM incoming_deliveries ORDER BY id LIMIT %s FOR UPDATE SKIP LOCKED
))
RETURNING id, delivery_key, event_type, CAST(body AS text)
"""

_CLAIM_ONE_SQL = """
DELETE FROM incoming_deliveries
WHERE id = ANY(ARRAY(
    SELECT id FROM incoming_deliveries WHERE id = %s FOR UPDATE SKIP LOCKED
))
RETURNING id, delivery_key, event_type, CAST(body AS text)
"""

_FORGET_SQL = "DELETE FROM incoming_deliveries WHERE id = ANY(%s)"


@dataclass(frozen=True, slots=True)
class StoredDelivery:
    id: int
    delivery_key: str | None
    event_type: str
    body_json: str  # as stored (JSONB's text form)
    body: dict[str, Any]


def _stored(row: tuple[int, str | None, str, str]) -> StoredDelivery:
    # Read as text and parsed here: the pending events store the text as it is.
    return StoredDelivery(row[0], row[1], row[2], row[3], json.loads(row[3]))


@dataclass(frozen=True, slots=True)
class NewDelivery:
    delivery_key: str | None  # stored form (normalised)
    source: str
    event_type: str
    body_json: str


def store_many(session: Session, deliveries: Sequence[NewDelivery]) -> set[int]:
    """Record and store many deliveries in one statement; the indexes of those stored
    (the others repeat a key recorded before, or earlier in `deliveries`)."""
    if not deliveries:
        return set()
    # Array literals, not lists: psycopg escapes each list element with a regular
    # expression in Python, which for a batch of webhook bodies (kilobytes each)
    # was a seventh of the service's interpreter time at 200 webhooks/s.
    params = {
        "ordinals": pg_arrays.integers(range(len(deliveries))),
        "keys": pg_arrays.texts(delivery.delivery_key for delivery in deliveries),
        "sources": pg_arrays.texts(delivery.source for delivery in deliveries),
        "event_types": pg_arrays.texts(delivery.event_type for delivery in deliveries),
        "bodies": pg_arrays.texts(delivery.body_json for delivery in deliveries),
    }
    rows = _driver(session).execute(_STORE_MANY_SQL, params).fetchall()
    return {int(row[0]) for row in rows}


def store_quietly(session: Session, delivery: NewDelivery) -> None:
    """Store one delivery without recording its key or waking anyone (see the SQL)."""
    _driver(session).execute(
        _STORE_QUIETLY_SQL,
        (delivery.delivery_key, delivery.source, delivery.event_type, delivery.body_json),
    )


def claim(session: Session, limit: int) -> list[StoredDelivery]:
    """Take up to `limit` stored deliveries, oldest first: deleted in this transaction
    (a rollback gives them back)."""
    rows = _driver(session).execute(_CLAIM_SQL, (limit,)).fetchall()
    # RETURNING follows no ORDER BY: oldest first is restored here.
    return sorted((_stored(row) for row in rows), key=lambda delivery: delivery.id)


def claim_one(session: Session, delivery_id: int) -> StoredDelivery | None:
    row = _driver(session).execute(_CLAIM_ONE_SQL, (delivery_id,)).fetchone()
    return None if row is None else _stored(row)


def forget(session: Session, delivery_ids: Sequence[int]) -> None:
    """Delete resolved deliveries (their key stays in `received_deliveries`)."""
    if delivery_ids:
        _driver(session).execute(_FORGET_SQL, (list(delivery_ids),))


def waiting_count(session: Session) -> int:
    """Deliveries stored and not yet resolved (tests, metrics)."""
    row = _driver(session).execute("SELECT count(*) FROM incoming_deliveries").fetchone()
    return 0 if row is None else int(row[0])


def _driver(session: Session) -> psycopg.Connection[Any]:
    connection = session.connection().connection.driver_connection
    if not isinstance(connection, psycopg.Connection):  # pragma: no cover - engine is psycopg
        raise TypeError("the workqueue engine needs the psycopg driver")
    return connection
