"""SQL of the scrape-time gauges. Read-only; run on the probe pool's connections.

Both reads are cached by the caller (`CachedCollector`), so a scrape storm
costs at most one of each per cache interval.
"""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.engine import Connection

# One indexed GROUP BY (ix_work_items_item_type_phase_created_at_id leads with both).
_ITEMS_BY_TYPE_AND_PHASE_SQL = sa.text(
    "SELECT item_type, phase, count(*) FROM work_items GROUP BY 1, 2"
)

# greatest() skips NULLs: the latest of enqueue time, end of backoff, end of lease.
# Reads only actionable rows through their partial index (ix_work_items_actionable_since).
_OLDEST_DUE_SQL = sa.text(
    "SELECT item_type, "
    "  extract(epoch FROM now() - min(greatest(updated_at, next_attempt_at, leased_until)))"
    "  ::float AS age_seconds "
    "FROM work_items "
    "WHERE actionable "
    "  AND (next_attempt_at IS NULL OR next_attempt_at <= now()) "
    "  AND (leased_until IS NULL OR leased_until < now()) "
    "GROUP BY item_type"
)


def items_by_type_and_phase(connection: Connection) -> list[tuple[str, str, int]]:
    """(item type, phase, number of items) for every pair that has items."""
    rows = connection.execute(_ITEMS_BY_TYPE_AND_PHASE_SQL).all()
    return [(str(item_type), str(phase), int(count)) for item_type, phase, count in rows]


def oldest_due_age_seconds(connection: Connection) -> dict[str, float]:
    """Per item type, how long its oldest due, unleased actionable item has waited."""
    rows = connection.execute(_OLDEST_DUE_SQL).all()
    return {str(item_type): float(age) for item_type, age in rows}


# The intake table holds only deliveries not yet resolved (rows are deleted as
# their events are stored), so this reads what is waiting, not history.
_WAITING_DELIVERIES_SQL = sa.text(
    "SELECT count(*), coalesce(extract(epoch FROM now() - min(received_at)), 0)::float"
    " FROM incoming_deliveries"
)


# The newest accepted delivery, webhook or SQS (the receivers' de-duplication table,
# read backwards through ix_received_deliveries_received_at: one index entry).
_NEWEST_DELIVERY_SQL = sa.text(
    "SELECT extract(epoch FROM max(received_at))::float FROM received_deliveries"
)


def newest_delivery_epoch(connection: Connection) -> float | None:
    """When the newest delivery any replica accepted was received (Unix time); None when
    none is kept (none yet, or the retention sweep pruned them all)."""
    found = connection.execute(_NEWEST_DELIVERY_SQL).scalar_one()
    return None if found is None else float(found)


def waiting_deliveries(connection: Connection) -> tuple[int, float]:
    """(deliveries stored and not yet resolved, seconds the oldest of them has waited)."""
    count, age = connection.execute(_WAITING_DELIVERIES_SQL).one()
    return int(count), max(float(age), 0.0)
