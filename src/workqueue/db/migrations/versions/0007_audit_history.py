"""audit history

Audit entries kept in the database for the per-item history
(`GET /api/work-items/{id}/history`), pruned after `audit.retention_days`,
and the MR items' `merge_blocker` (why reconcile_mr does not merge now).

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-01 08:30:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "audit_entries",
        sa.Column("id", sa.BigInteger(), sa.Identity(), nullable=False),
        sa.Column("entry_id", sa.Uuid(), nullable=False),
        sa.Column("occurred_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("work_item_id", sa.Uuid(), nullable=True),
        sa.Column("item_type", sa.String(length=64), nullable=True),
        sa.Column("event_type", sa.String(length=64), nullable=False),
        sa.Column("actor", sa.Text(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("before", postgresql.JSONB(astext_type=sa.Text()), nullable=True),
        sa.Column("after", postgresql.JSONB(astext_type=sa.Text()), nullable=True),
        sa.Column(
            "details",
            postgresql.JSONB(astext_type=sa.Text()),
            server_default="{}",
            nullable=False,
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_audit_entries")),
        sa.UniqueConstraint("entry_id", name=op.f("uq_audit_entries_entry_id")),
    )
    op.create_index(
        "ix_audit_entries_work_item_id_occurred_at_id",
        "audit_entries",
        ["work_item_id", "occurred_at", "id"],
    )
    op.create_index("ix_audit_entries_occurred_at", "audit_entries", ["occurred_at"])
    op.add_column(
        "mr_details",
        sa.Column("merge_blocker", postgresql.JSONB(astext_type=sa.Text()), nullable=True),
    )


def downgrade() -> None:
    op.drop_column("mr_details", "merge_blocker")
    op.drop_index("ix_audit_entries_occurred_at", table_name="audit_entries")
    op.drop_index("ix_audit_entries_work_item_id_occurred_at_id", table_name="audit_entries")
    op.drop_table("audit_entries")
