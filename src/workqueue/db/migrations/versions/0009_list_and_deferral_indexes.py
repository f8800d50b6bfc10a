"""list and deferral indexes

Newest-first lists page on `(work_items.created_at, work_items.id)`: an index
on exactly those columns, and `(item_type, phase, created_at, id)` for the
generic list filtered by type and phase (it replaces `(item_type, phase)`,
its prefix, which the per-phase counts use just as well).

Deferrals end when an item leaves `active`: a trigger clears `pending_until`
on the item's dimension rows whichever code changes the phase (the engine, a
type's executor or event result, a cancel, a failure), and this revision
clears the rows of items that finished before it. Only active items' rows
stay in `ix_work_item_statuses_pending_until`, so the timer and the deferral
wake-up are index probes, not scans over every finished item.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-01 09:15:00
"""

from __future__ import annotations

from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

# A deferral means "look again then"; once an item leaves `active` nothing
# looks again, so its rows' deferrals end with it, whichever code changed the
# phase (the engine, a type's executor or event result, a cancel, a failure).
CLEAR_DEFERRALS_FUNCTION = """
CREATE FUNCTION workqueue_clear_deferrals() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE work_item_statuses SET pending_until = NULL, updated_at = now()
    WHERE work_item_id = NEW.id AND pending_until IS NOT NULL;
    RETURN NULL;
END;
$$
"""

CLEAR_DEFERRALS_TRIGGER = """
CREATE TRIGGER work_items_clear_deferrals
AFTER UPDATE OF phase ON work_items
FOR EACH ROW
WHEN (OLD.phase = 'active' AND NEW.phase <> 'active')
EXECUTE FUNCTION workqueue_clear_deferrals()
"""

# Rows of items that finished before this revision.
CLEAR_EXISTING_DEFERRALS = """
UPDATE work_item_statuses AS status SET pending_until = NULL, updated_at = now()
FROM work_items AS item
WHERE item.id = status.work_item_id AND item.phase <> 'active'
  AND status.pending_until IS NOT NULL
"""


def upgrade() -> None:
    op.create_index("ix_work_items_created_at_id", "work_items", ["created_at", "id"])
    op.create_index(
        "ix_work_items_item_type_phase_created_at_id",
        "work_items",
        ["item_type", "phase", "created_at", "id"],
    )
    op.drop_index("ix_work_items_item_type_phase", table_name="work_items")
    op.execute(CLEAR_DEFERRALS_FUNCTION)
    op.execute(CLEAR_DEFERRALS_TRIGGER)
    op.execute(CLEAR_EXISTING_DEFERRALS)


def downgrade() -> None:
    op.execute("DROP TRIGGER work_items_clear_deferrals ON work_items")
    op.execute("DROP FUNCTION workqueue_clear_deferrals()")
    op.create_index("ix_work_items_item_type_phase", "work_items", ["item_type", "phase"])
    op.drop_index("ix_work_items_item_type_phase_created_at_id", table_name="work_items")
    op.drop_index("ix_work_items_created_at_id", table_name="work_items")
