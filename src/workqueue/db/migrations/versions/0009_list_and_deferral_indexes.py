"""list and deferral indexes

Newest-first lists page on `(work_items.created_at, work_items.id)`: an index
on exactly those columns, and `(item_type, phase, created_at, id)` for the
generic list filtered by type and phase (it replaces `(item_type, phase)`,
its prefix, which the per-phase counts use just as well).

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


def upgrade() -> None:
    op.create_index("ix_work_items_created_at_id", "work_items", ["created_at", "id"])
    op.create_index(
        "ix_work_items_item_type_phase_created_at_id",
        "work_items",
        ["item_type", "phase", "created_at", "id"],
    )
    op.drop_index("ix_work_items_item_type_phase", table_name="work_items")


def downgrade() -> None:
    op.create_index("ix_work_items_item_type_phase", "work_items", ["item_type", "phase"])
    op.drop_index("ix_work_items_item_type_phase_created_at_id", table_name="work_items")
    op.drop_index("ix_work_items_created_at_id", table_name="work_items")
