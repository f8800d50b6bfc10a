"""SQL of item retention: delete finished items, and every row about them, in batches;
mark old finished items emptied of their contents (`retention.content_days`, the safety
sweep; each type drops what that means for it).

An item is finished when its phase is `completed`, `failed` or `cancelled`;
it counts as finished since its last change (`updated_at`), so an item
touched again later (a cancel of a failed item, say) is kept that much
longer. Rows that reference an item by foreign key (its detail row, its
dimension rows, pending events, attention memberships) go with it through
`ON DELETE CASCADE`; the engine's own referencing tables without a foreign
key (audit entries, outbox deliveries) are deleted here explicitly.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, fields
from datetime import datetime, timedelta

import sqlalchemy as sa
from sqlalchemy.orm import Session

FINISHED_PHASES = ("completed", "failed", "cancelled")


@dataclass
class PruneCounts:
    """Rows deleted (or, for a dry run, that would be)."""

    items: int = 0
    dimension_rows: int = 0
    pending_events: int = 0
    audit_entries: int = 0
    outbox_deliveries: int = 0

    def add(self, other: PruneCounts) -> None:
        for field in fields(self):
            setattr(self, field.name, getattr(self, field.name) + getattr(other, field.name))


def cutoff_before(session: Session, age: timedelta) -> datetime:
    """The database clock minus `age`: one fixed cutoff for a whole run."""
    cutoff: datetime = session.execute(
        sa.text("SELECT now() - make_interval(secs => :seconds)"),
        {"seconds": age.total_seconds()},
    ).scalar_one()
    return cutoff


# One batch: the oldest finished items, locked so a concurrent retry (which
# makes an item live again) either waits for this batch or is skipped by it,
# then every row about them. SKIP LOCKED: a row some request holds is left
# for a later run rather than waited for. The CTE's row locks re-check the
# phase, so an item retried before the lock is no longer selected.
DELETE_BATCH = sa.text(
    """
    WITH doomed AS (
        SELECT id FROM work_items
        WHERE phase IN ('completed', 'failed', 'cancelled') AND updated_at < :cutoff
        ORDER BY updated_at
        LIMIT :batch_size
        FOR UPDATE SKIP LOCKED
    ),
    dimension_rows AS (
        DELETE FROM work_item_statuses WHERE work_item_id IN (SELECT id FROM doomed)
        RETURNING 1
    ),
    pending_events AS (
        DELETE FROM pending_events WHERE work_item_id IN (SELECT id FROM doomed)
        RETURNING 1
    ),
    audit_entries AS (
        DELETE FROM audit_entries WHERE work_item_id IN (SELECT id FROM doomed)
        RETURNING 1
    ),
    outbox_deliveries AS (
        -- IS NOT NULL spelled out: the join alone does not let the planner
        -- use the partial ix_outbox_deliveries_work_item_id.
        DELETE FROM outbox_deliveries
        WHERE work_item_id IS NOT NULL AND work_item_id IN (SELECT id FROM doomed)
        RETURNING 1
    ),
    items AS (
        DELETE FROM work_items WHERE id IN (SELECT id FROM doomed)
        RETURNING 1
    )
    SELECT (SELECT count(*) FROM items),
           (SELECT count(*) FROM dimension_rows),
           (SELECT count(*) FROM pending_events),
           (SELECT count(*) FROM audit_entries),
           (SELECT count(*) FROM outbox_deliveries)
    """
)


def delete_finished_batch(session: Session, *, cutoff: datetime, batch_size: int) -> PruneCounts:
    """Delete up to `batch_size` items finished before `cutoff`, with their rows."""
    row = session.execute(DELETE_BATCH, {"cutoff": cutoff, "batch_size": batch_size}).one()
    return PruneCounts(*(int(value) for value in row))


_COUNT_FINISHED = sa.text(
    """
    WITH doomed AS (
        SELECT id FROM work_items
        WHERE phase IN ('completed', 'failed', 'cancelled') AND updated_at < :cutoff
    )
    SELECT (SELECT count(*) FROM doomed),
           (SELECT count(*) FROM work_item_statuses WHERE work_item_id IN (SELECT id FROM doomed)),
           (SELECT count(*) FROM pending_events WHERE work_item_id IN (SELECT id FROM doomed)),
           (SELECT count(*) FROM audit_entries WHERE work_item_id IN (SELECT id FROM doomed)),
           (SELECT count(*) FROM outbox_deliveries WHERE work_item_id IN (SELECT id FROM doomed))
    """
)


def count_finished(session: Session, *, cutoff: datetime) -> PruneCounts:
    """What a prune with this cutoff would delete now (for `--dry-run`)."""
    row = session.execute(_COUNT_FINISHED, {"cutoff": cutoff}).one()
    return PruneCounts(*(int(value) for value in row))


# One batch of the contents drop: the oldest finished items of one type not yet
# emptied, locked (SKIP LOCKED: another replica's sweep, or a retry or
# resubmission holding the row, is left alone; a row retried before the lock no
# longer matches the phase), marked emptied. Chosen by `contents_dropped_at`, not
# by `content_bytes`: an emptied item still counts what it keeps (its title, say).
# `updated_at` is left as it is: it stays the time the item finished, which
# `prune` ages from.
_TAKE_CONTENTS_BATCH = sa.text(
    """
    WITH batch AS (
        SELECT id FROM work_items
        WHERE contents_dropped_at IS NULL AND phase IN ('completed', 'failed', 'cancelled')
          AND item_type = :item_type AND updated_at < :cutoff
        ORDER BY updated_at
        LIMIT :batch_size
        FOR UPDATE SKIP LOCKED
    )
    UPDATE work_items SET contents_dropped_at = clock_timestamp()
    FROM batch WHERE work_items.id = batch.id
    RETURNING work_items.id
    """
)


def take_finished_contents(
    session: Session, *, item_type: str, cutoff: datetime, batch_size: int
) -> list[uuid.UUID]:
    """Mark up to `batch_size` items of `item_type` finished before `cutoff` as emptied
    of their contents, and return them: the type drops the contents, and sets their
    `content_bytes` to what is left, in the same transaction."""
    rows = session.execute(
        _TAKE_CONTENTS_BATCH,
        {"cutoff": cutoff, "item_type": item_type, "batch_size": batch_size},
    )
    return [uuid.UUID(str(row.id)) for row in rows]
