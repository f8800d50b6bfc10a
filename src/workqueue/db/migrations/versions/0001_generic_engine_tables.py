"""generic engine tables

Revision ID: 0001
Revises:
Create Date: 2026-11-29 22:33:16.712202
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


# The per-item advisory lock key (DDR-34): the UUID's low 63 bits, identical to
# `workqueue.queue.enqueue.advisory_lock_key`.
ITEM_LOCK_KEY_FUNCTION = """
CREATE FUNCTION workqueue_item_lock_key(item_id uuid) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT ('x' || right(replace(item_id::text, '-', ''), 16))::bit(64)::bigint
           & 9223372036854775807
$$
"""

# Ends a claim with the item idle, unless work arrived since the step read it.
# Lock first, then look: each statement of a VOLATILE plpgsql function takes a
# fresh snapshot, so the UPDATE sees everything committed before the lock was
# granted. Enqueuers take the same lock and bump updated_at.
GO_IDLE_FUNCTION = """
CREATE FUNCTION workqueue_go_idle(
    item_id uuid, token uuid, seen_updated_at timestamptz, action_succeeded boolean
) RETURNS boolean
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(workqueue_item_lock_key(item_id));
    UPDATE work_items SET
        actionable = false, leased_until = NULL, lease_token = NULL, updated_at = now(),
        attempts = CASE WHEN action_succeeded THEN 0 ELSE attempts END,
        error = CASE WHEN action_succeeded THEN NULL ELSE error END,
        next_attempt_at = CASE WHEN action_succeeded THEN NULL ELSE next_attempt_at END
    WHERE id = item_id AND lease_token = token AND updated_at = seen_updated_at
      AND NOT EXISTS (SELECT 1 FROM pending_events WHERE work_item_id = item_id);
    RETURN FOUND;
END
$$
"""


def upgrade() -> None:
    op.create_table(
        "work_items",
        sa.Column("id", sa.Uuid(), server_default=sa.text("gen_random_uuid()"), nullable=False),
        sa.Column("item_type", sa.String(length=64), nullable=False),
        sa.Column(
            "phase",
            sa.Enum(
                "active",
                "completed",
                "failed",
                "cancelled",
                name="phase",
                native_enum=False,
                create_constraint=True,
                length=32,
            ),
            server_default="active",
            nullable=False,
        ),
        sa.Column("actionable", sa.Boolean(), server_default=sa.text("false"), nullable=False),
        sa.Column("attempts", sa.Integer(), server_default="0", nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("leased_until", sa.DateTime(timezone=True), nullable=True),
        sa.Column("lease_token", sa.Uuid(), nullable=True),
        sa.Column("next_attempt_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("caller_identity", sa.Text(), nullable=False),
        sa.Column("idempotency_key", sa.Text(), nullable=True),
        sa.Column("generation", sa.Integer(), server_default="1", nullable=False),
        sa.Column("last_event_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column(
            "updated_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.CheckConstraint("attempts >= 0", name=op.f("ck_work_items_attempts_not_negative")),
        sa.CheckConstraint("generation >= 1", name=op.f("ck_work_items_generation_positive")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_work_items")),
    )
    op.create_index(
        "ix_work_items_actionable_since",
        "work_items",
        ["updated_at"],
        unique=False,
        postgresql_where=sa.text("actionable"),
    )
    op.create_index(
        "ix_work_items_item_type_phase", "work_items", ["item_type", "phase"], unique=False
    )
    op.create_index(
        "uq_work_items_idempotency_key_live",
        "work_items",
        ["idempotency_key"],
        unique=True,
        postgresql_where=sa.text("phase NOT IN ('completed', 'cancelled')"),
    )
    op.create_table(
        "pending_events",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column("work_item_id", sa.Uuid(), nullable=False),
        sa.Column("event_type", sa.String(length=64), nullable=False),
        sa.Column("body", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("dedupe_key", sa.Text(), nullable=True),
        sa.Column(
            "received_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.ForeignKeyConstraint(
            ["work_item_id"],
            ["work_items.id"],
            name=op.f("fk_pending_events_work_item_id_work_items"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_pending_events")),
        sa.UniqueConstraint("dedupe_key", name=op.f("uq_pending_events_dedupe_key")),
    )
    op.create_index(
        op.f("ix_pending_events_work_item_id"), "pending_events", ["work_item_id"], unique=False
    )
    op.create_table(
        "work_item_statuses",
        sa.Column("work_item_id", sa.Uuid(), nullable=False),
        sa.Column("dimension", sa.String(length=64), nullable=False),
        sa.Column("variant", sa.String(length=255), server_default="", nullable=False),
        sa.Column(
            "status",
            sa.Enum(
                "true",
                "false",
                name="dimension_status",
                native_enum=False,
                create_constraint=True,
                length=32,
            ),
            nullable=False,
        ),
        sa.Column("pending_until", sa.DateTime(timezone=True), nullable=True),
        sa.Column(
            "updated_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.ForeignKeyConstraint(
            ["work_item_id"],
            ["work_items.id"],
            name=op.f("fk_work_item_statuses_work_item_id_work_items"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint(
            "work_item_id", "dimension", "variant", name=op.f("pk_work_item_statuses")
        ),
    )
    op.create_index(
        "ix_work_item_statuses_pending_until",
        "work_item_statuses",
        ["pending_until"],
        unique=False,
        postgresql_where=sa.text("pending_until IS NOT NULL"),
    )
    op.execute(ITEM_LOCK_KEY_FUNCTION)
    op.execute(GO_IDLE_FUNCTION)


def downgrade() -> None:
    op.execute("DROP FUNCTION workqueue_go_idle(uuid, uuid, timestamptz, boolean)")
    op.execute("DROP FUNCTION workqueue_item_lock_key(uuid)")
    op.drop_index(
        "ix_work_item_statuses_pending_until",
        table_name="work_item_statuses",
        postgresql_where=sa.text("pending_until IS NOT NULL"),
    )
    op.drop_table("work_item_statuses")
    op.drop_index(op.f("ix_pending_events_work_item_id"), table_name="pending_events")
    op.drop_table("pending_events")
    op.drop_index(
        "uq_work_items_idempotency_key_live",
        table_name="work_items",
        postgresql_where=sa.text("phase NOT IN ('completed', 'cancelled')"),
    )
    op.drop_index("ix_work_items_item_type_phase", table_name="work_items")
    op.drop_index(
        "ix_work_items_actionable_since",
        table_name="work_items",
        postgresql_where=sa.text("actionable"),
    )
    op.drop_table("work_items")
