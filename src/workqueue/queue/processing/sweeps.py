"""The dispatcher's sweeps: wake items whose deferrals came due or that hold events, and
tell how long until anything is due.

Each sweep is one bounded batch, set-based, under the enqueue lock protocol
(`enqueue.mark_actionable_many`); nothing here commits.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection

import sqlalchemy as sa
from sqlalchemy.orm import Session

from workqueue.queue.enqueue import mark_actionable_many

# Items one wake-up transaction makes actionable: each holds an advisory lock
# until commit, and the shared lock table has ~max_locks_per_transaction (64)
# slots per connection.
WAKE_BATCH_SIZE = 500


def wake_due_deferrals(
    session: Session, item_types: Collection[str], *, limit: int = WAKE_BATCH_SIZE
) -> list[tuple[uuid.UUID, str]]:
    """Up to `limit` items whose deferrals came due: clear them and make the items actionable.

    One batch, set-based: run it in its own transaction and repeat until it
    returns nothing (each batch holds up to `limit` advisory locks until its
    commit; all at once would exhaust the shared lock table).
    """
    rows = session.execute(
        sa.text(
            # Walks ix_work_item_statuses_pending_until in order: an index probe
            # that stops after `limit` due rows, however large the tables are.
            "SELECT DISTINCT due.id, due.item_type FROM ("
            "  SELECT item.id, item.item_type FROM work_item_statuses AS status "
            "  JOIN work_items AS item ON item.id = status.work_item_id "
            "  WHERE status.pending_until IS NOT NULL AND status.pending_until <= now() "
            "    AND item.phase = 'active' AND item.item_type = ANY(:item_types) "
            "  ORDER BY status.pending_until LIMIT :limit"
            ") AS due"
        ),
        {"item_types": list(item_types), "limit": limit},
    ).all()
    woken = [(row.id, row.item_type) for row in rows]
    mark_actionable_many(session, woken)
    if woken:
        session.execute(
            sa.text(
                "UPDATE work_item_statuses SET pending_until = NULL, updated_at = now() "
                "WHERE work_item_id = ANY(:ids) AND pending_until <= now()"
            ),
            {"ids": [item_id for item_id, _ in woken]},
        )
    return woken


def wake_items_with_events(
    session: Session, item_types: Collection[str], *, limit: int = WAKE_BATCH_SIZE
) -> list[tuple[uuid.UUID, str]]:
    """Recovery (DDR-35): up to `limit` idle items holding pending events, made actionable.

    One batch, like `wake_due_deferrals`: repeat, one transaction each, until
    it returns nothing.
    """
    rows = session.execute(
        sa.text(
            "SELECT item.id, item.item_type FROM work_items AS item "
            "WHERE NOT item.actionable AND item.item_type = ANY(:item_types) "
            "  AND EXISTS (SELECT 1 FROM pending_events AS event "
            "              WHERE event.work_item_id = item.id) "
            "LIMIT :limit"
        ),
        {"item_types": list(item_types), "limit": limit},
    ).all()
    woken = [(row.id, row.item_type) for row in rows]
    mark_actionable_many(session, woken)
    return woken


# The earliest deferral of an active item of these types: walks
# ix_work_item_statuses_pending_until in order and stops at the first row of
# a wanted item. Only active items' rows are in that partial index (leaving
# `active` clears them, migration 0009), so this is an index probe whatever
# the number of finished items.
NEXT_DEFERRAL_SQL = (
    "SELECT status.pending_until FROM work_item_statuses AS status "
    "JOIN work_items AS item ON item.id = status.work_item_id "
    "WHERE status.pending_until IS NOT NULL AND item.phase = 'active' "
    "  AND item.item_type = ANY(:item_types) "
    "ORDER BY status.pending_until LIMIT 1"
)


def seconds_until_due(
    session: Session, item_types: Collection[str], *, held: Collection[uuid.UUID] = ()
) -> float | None:
    """Seconds until the earliest backoff, foreign lease expiry or deferral; None if none.

    Leases in `held` are this process's own: it heartbeats them, so their
    expiry is not something to wake up for.
    """
    seconds: float | None = session.execute(
        sa.text(
            "SELECT extract(epoch FROM least("
            "  (SELECT min(coalesce(greatest(next_attempt_at, leased_until), now())) "
            "   FROM work_items WHERE actionable AND item_type = ANY(:item_types) "
            "     AND NOT (id = ANY(:held))), "
            f"  ({NEXT_DEFERRAL_SQL})"
            ") - now())::float"
        ),
        {"item_types": list(item_types), "held": list(held)},
    ).scalar_one()
    return seconds
