"""webhook intake

Receivers (the webhook route, the SQS consumer) store each accepted delivery
in `incoming_deliveries`, beside its key in `received_deliveries`, and answer;
the intake resolver turns stored deliveries into pending events behind them
and deletes them. Rows are few and short-lived: the primary key serves the
oldest-first batch claims.

Webhook resolution finds the active items of a hook's project by their
canonical project path: a partial index of active items by `project_path`.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-01 10:30:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "incoming_deliveries",
        sa.Column("id", sa.BigInteger(), sa.Identity(), nullable=False),
        sa.Column("delivery_key", sa.Text(), nullable=True),
        sa.Column("source", sa.String(length=32), nullable=False),
        sa.Column("event_type", sa.String(length=64), nullable=False),
        sa.Column("body", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column(
            "received_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_incoming_deliveries")),
    )
    op.create_index(
        "ix_work_items_active_project_path",
        "work_items",
        ["project_path"],
        postgresql_where=sa.text("phase = 'active'"),
    )


def downgrade() -> None:
    op.drop_index("ix_work_items_active_project_path", table_name="work_items")
    op.drop_table("incoming_deliveries")
