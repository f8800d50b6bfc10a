"""SQL of the audit history: store entries, page one item's history, prune old rows."""

from __future__ import annotations

import base64
import binascii
import json
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Session

from workqueue.queue.enqueue import driver_connection
from workqueue.queue.models import AuditRecord
from workqueue.queue.read_repository import InvalidCursorError

MAX_HISTORY_PAGE = 500
# One retention pass deletes at most this many rows, so a first prune after a
# long outage never holds a long transaction; the next pass takes the rest.
PRUNE_BATCH = 10_000


@dataclass(frozen=True)
class HistoryPage:
    entries: list[AuditRecord]
    next_cursor: str | None


# The rows travel as one JSON array: psycopg adapts Python lists element by
# element in Python (each jsonb value dumped, then every array escaped with a
# regular expression), which cost more than the statement itself; one
# `json.dumps` of the rows is a tenth of that. The function scan keeps the
# rows' order, so ids are assigned in the order the entries were written.
_INSERT_ENTRIES = (
    "INSERT INTO audit_entries (entry_id, occurred_at, work_item_id, item_type, event_type,"
    " actor, reason, before, after, details) "
    "SELECT entry_id, occurred_at, work_item_id, item_type, event_type, actor, reason,"
    " before, after, details "
    "FROM jsonb_to_recordset(%s::jsonb) AS r(entry_id uuid, occurred_at timestamptz,"
    " work_item_id uuid, item_type text, event_type text, actor text, reason text,"
    " before jsonb, after jsonb, details jsonb) "
    "ON CONFLICT (entry_id) DO NOTHING"
)


def insert_entries(session: Session, rows: Sequence[Mapping[str, Any]]) -> None:
    """Store rows (see `audit_history.history_row`) in one statement; stored entries are skipped.

    Straight to the driver: every processing step stores its entries, and
    the ORM's bulk insert costs more than the statement. The rows' values
    are JSON-safe already (`history_row`); ids and times go as their text
    (a naive time reads in the session's time zone, as psycopg's own
    adaptation would have it).
    """
    if not rows:
        return
    document = _ENCODE([_json_row(row) for row in rows])
    driver_connection(session).execute(_INSERT_ENTRIES, (document,))


def _json_row(row: Mapping[str, Any]) -> dict[str, Any]:
    work_item_id = row["work_item_id"]
    return {
        "entry_id": str(row["entry_id"]),
        "occurred_at": row["occurred_at"].isoformat(),
        "work_item_id": None if work_item_id is None else str(work_item_id),
        "item_type": row["item_type"],
        "event_type": row["event_type"],
        "actor": row["actor"],
        "reason": row["reason"],
        "before": row["before"],
        "after": row["after"],
        "details": row["details"],
    }


# NaN and infinities are not JSON (jsonb refuses them); history_row has replaced them.
_ENCODE = json.JSONEncoder(allow_nan=False).encode


def history_page(
    session: Session, work_item_id: uuid.UUID, *, limit: int, cursor: str | None
) -> HistoryPage:
    """One item's entries, oldest first, after `cursor` (a previous page's next_cursor)."""
    statement = sa.select(AuditRecord).where(AuditRecord.work_item_id == work_item_id)
    if cursor is not None:
        occurred_at, row_id = _decode_cursor(cursor)
        statement = statement.where(
            sa.tuple_(AuditRecord.occurred_at, AuditRecord.id)
            > sa.tuple_(sa.literal(occurred_at), sa.literal(row_id))
        )
    rows = list(
        session.scalars(
            statement.order_by(AuditRecord.occurred_at, AuditRecord.id).limit(limit + 1)
        )
    )
    next_cursor = _encode_cursor(rows[limit - 1]) if len(rows) > limit else None
    return HistoryPage(rows[:limit], next_cursor)


def prune(session: Session, older_than: timedelta) -> int:
    """Delete up to PRUNE_BATCH entries older than `older_than`; returns how many."""
    oldest = (
        sa.select(AuditRecord.id)
        .where(AuditRecord.occurred_at < sa.func.now() - older_than)
        .order_by(AuditRecord.occurred_at)
        .limit(PRUNE_BATCH)
        .scalar_subquery()
    )
    result = session.execute(sa.delete(AuditRecord).where(AuditRecord.id.in_(oldest)))
    return int(getattr(result, "rowcount", 0) or 0)


def _encode_cursor(row: AuditRecord) -> str:
    payload = json.dumps({"at": row.occurred_at.isoformat(), "id": row.id})
    return base64.urlsafe_b64encode(payload.encode()).decode().rstrip("=")


def _decode_cursor(cursor: str) -> tuple[datetime, int]:
    invalid = InvalidCursorError("cursor is not valid; pass next_cursor from a previous page")
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        payload: Any = json.loads(base64.urlsafe_b64decode(padded.encode()))
    except (binascii.Error, ValueError, RecursionError) as error:
        raise invalid from error
    at = payload.get("at") if isinstance(payload, dict) else None
    row_id = payload.get("id") if isinstance(payload, dict) else None
    if not isinstance(at, str) or type(row_id) is not int or not 0 <= row_id < 2**63:
        raise invalid
    try:
        occurred_at = datetime.fromisoformat(at)
    except ValueError as error:
        raise invalid from error
    if occurred_at.tzinfo is None:
        raise invalid
    return occurred_at, row_id
