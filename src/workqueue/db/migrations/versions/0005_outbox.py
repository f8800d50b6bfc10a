"""outbox

The outbox of outbound events (`notifications:`): one row per event and
subscriber, written in the transaction of the change it announces and
delivered (Standard Webhooks) by the outbox delivery worker.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01 08:30:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "outbox_deliveries",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column("event_id", sa.Uuid(), nullable=False),
        sa.Column("subscriber", sa.String(length=64), nullable=False),
        sa.Column("event_type", sa.String(length=64), nullable=False),
        sa.Column("work_item_id", sa.Uuid(), nullable=True),
        sa.Column("data", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column(
            "status",
            sa.Enum(
                "pending",
                "delivered",
                "abandoned",
                name="delivery_status",
                native_enum=False,
                create_constraint=True,
                length=32,
            ),
            server_default="pending",
            nullable=False,
        ),
        sa.Column("attempts", sa.Integer(), server_default="0", nullable=False),
        sa.Column(
            "next_attempt_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column("delivered_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("abandoned_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint(
            "attempts >= 0", name=op.f("ck_outbox_deliveries_attempts_not_negative")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_outbox_deliveries")),
    )
    op.create_index(
        "ix_outbox_deliveries_due",
        "outbox_deliveries",
        ["next_attempt_at"],
        postgresql_where=sa.text("status = 'pending'"),
    )
    op.create_index(
        "ix_outbox_deliveries_delivered_at",
        "outbox_deliveries",
        ["delivered_at"],
        postgresql_where=sa.text("status = 'delivered'"),
    )


def downgrade() -> None:
    op.drop_index("ix_outbox_deliveries_delivered_at", table_name="outbox_deliveries")
    op.drop_index("ix_outbox_deliveries_due", table_name="outbox_deliveries")
    op.drop_table("outbox_deliveries")
