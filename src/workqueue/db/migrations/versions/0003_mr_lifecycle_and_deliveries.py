"""mr lifecycle and deliveries

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-29 23:20:07.676987
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "received_deliveries",
        sa.Column("delivery_key", sa.Text(), nullable=False),
        sa.Column("source", sa.String(length=32), nullable=False),
        sa.Column("event_type", sa.String(length=64), nullable=False),
        sa.Column(
            "received_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.PrimaryKeyConstraint("delivery_key", name=op.f("pk_received_deliveries")),
    )
    op.create_index(
        "ix_received_deliveries_received_at", "received_deliveries", ["received_at"], unique=False
    )
    op.add_column("mr_details", sa.Column("head_pipeline_sha", sa.Text(), nullable=True))
    op.add_column("mr_details", sa.Column("head_pipeline_status", sa.Text(), nullable=True))
    op.add_column("mr_details", sa.Column("foreign_head_sha", sa.Text(), nullable=True))
    op.add_column(
        "mr_details",
        sa.Column(
            "ci_retry_counts",
            postgresql.JSONB(astext_type=sa.Text()),
            server_default="{}",
            nullable=False,
        ),
    )


def downgrade() -> None:
    op.drop_column("mr_details", "ci_retry_counts")
    op.drop_column("mr_details", "foreign_head_sha")
    op.drop_column("mr_details", "head_pipeline_status")
    op.drop_column("mr_details", "head_pipeline_sha")
    op.drop_index("ix_received_deliveries_received_at", table_name="received_deliveries")
    op.drop_table("received_deliveries")
