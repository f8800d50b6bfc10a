"""attention queues and memberships

`attention_queues` holds each configured queue (its row also serialises rule
changes against membership writes); `attention_memberships` is unique per
(queue, item) and keeps hand-removed members as a marker.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-01 08:30:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "attention_queues",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column("name", sa.String(length=63), nullable=False),
        sa.Column("description", sa.Text(), server_default="", nullable=False),
        sa.Column(
            "match", postgresql.JSONB(astext_type=sa.Text()), server_default="{}", nullable=False
        ),
        sa.Column("prune", sa.Boolean(), server_default=sa.false(), nullable=False),
        sa.Column("enabled", sa.Boolean(), server_default=sa.true(), nullable=False),
        sa.Column("retired_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column(
            "updated_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_attention_queues")),
        sa.UniqueConstraint("name", name=op.f("uq_attention_queues_name")),
    )
    op.create_table(
        "attention_memberships",
        sa.Column("queue_id", sa.BigInteger(), nullable=False),
        sa.Column("work_item_id", sa.Uuid(), nullable=False),
        sa.Column(
            "added_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.Column("added_by", sa.Text(), nullable=False),
        sa.Column("removed_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("removed_by", sa.Text(), nullable=True),
        sa.Column("removed_fingerprint", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(
            ["queue_id"],
            ["attention_queues.id"],
            name=op.f("fk_attention_memberships_queue_id_attention_queues"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["work_item_id"],
            ["work_items.id"],
            name=op.f("fk_attention_memberships_work_item_id_work_items"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("queue_id", "work_item_id", name=op.f("pk_attention_memberships")),
    )
    op.create_index(
        "ix_attention_memberships_work_item_id", "attention_memberships", ["work_item_id"]
    )
    op.create_index(
        "ix_attention_memberships_current",
        "attention_memberships",
        ["queue_id"],
        postgresql_where=sa.text("removed_at IS NULL"),
    )


def downgrade() -> None:
    op.drop_table("attention_memberships")
    op.drop_table("attention_queues")
