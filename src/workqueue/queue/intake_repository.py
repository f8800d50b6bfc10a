"""SQL of the delivery intake (`incoming_deliveries`): store, claim in batches, forget.

Straight to the driver (one parameter style, `%s`): storing a delivery is the
webhook's whole answer, and the ORM's per-statement overhead would be most of
its cost.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import psycopg
from sqlalchemy.orm import Session

INTAKE_CHANNEL = "workqueue_intake"  # NOTIFY'd when a delivery is stored; no payload

# One statement: the de-duplication record and the stored delivery, or neither
# (a key seen before). A concurrent insert of the same key waits for the other
# transaction, so exactly one of them stores the delivery. The NOTIFY is sent
# on commit.
_STORE_KEYED_SQL = (
    """
WITH recorded AS (
    INSERT INTO received_deliveries (delivery_key, source, event_type)
    VALUES (%(key)s, %(source)s, %(event_type)s)
    ON CONFLICT (delivery_key) DO NOTHING
    RETURNING delivery_key
), stored AS (
    INSERT INTO incoming_deliveries (delivery_key, source, event_type, body)
    SELECT delivery_key, %(source)s, %(event_type)s, CAST(%(body)s AS jsonb) FROM recorded
    RETURNING id
)
SELECT pg_notify('"""
    + INTAKE_CHANNEL
    + """', '') FROM stored
"""
)

_STORE_UNKEYED_SQL = (
    """
WITH stored AS (
    INSERT INTO incoming_deliveries (source, event_type, body)
    VALUES (%(source)s, %(event_type)s, CAST(%(body)s AS jsonb))
    RETURNING id
)
SELECT pg_notify('"""
    + INTAKE_CHANNEL
    + """', '') FROM stored
"""
)

# Oldest first; rows another replica is resolving are skipped, and come back
# unresolved if that replica dies before committing.
_CLAIM_SQL = """
SELECT id, delivery_key, event_type, body FROM incoming_deliveries
ORDER BY id
LIMIT %s
FOR UPDATE SKIP LOCKED
"""

_CLAIM_ONE_SQL = """
SELECT id, delivery_key, event_type, body FROM incoming_deliveries
WHERE id = %s
FOR UPDATE SKIP LOCKED
"""

_FORGET_SQL = "DELETE FROM incoming_deliveries WHERE id = ANY(%s)"


@dataclass(frozen=True, slots=True)
class StoredDelivery:
    id: int
    delivery_key: str | None
    event_type: str
    body: dict[str, Any]


def store(
    session: Session, *, delivery_key: str | None, source: str, event_type: str, body_json: str
) -> bool:
    """Record and store one delivery; False when `delivery_key` was recorded before."""
    params = {"key": delivery_key, "source": source, "event_type": event_type, "body": body_json}
    sql = _STORE_UNKEYED_SQL if delivery_key is None else _STORE_KEYED_SQL
    return _driver(session).execute(sql, params).fetchone() is not None


def claim(session: Session, limit: int) -> list[StoredDelivery]:
    """Lock up to `limit` stored deliveries, oldest first, for this transaction."""
    rows = _driver(session).execute(_CLAIM_SQL, (limit,)).fetchall()
    return [StoredDelivery(*row) for row in rows]


def claim_one(session: Session, delivery_id: int) -> StoredDelivery | None:
    row = _driver(session).execute(_CLAIM_ONE_SQL, (delivery_id,)).fetchone()
    return None if row is None else StoredDelivery(*row)


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
