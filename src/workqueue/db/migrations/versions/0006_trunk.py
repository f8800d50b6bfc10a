"""trunk

The `trunk` item type: `trunk_queues` (one row per configured project and
branch: slots in flight, last green, newest head, compare-and-set version)
and `trunk_details` (one landed head: queue, ingest sequence, sha, state,
build strategy and base, its pipeline).

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01 08:30:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def _enum(name: str, *values: str) -> sa.Enum:
    return sa.Enum(*values, name=name, native_enum=False, create_constraint=True, length=32)


def upgrade() -> None:
    op.create_table(
        "trunk_queues",
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("project", sa.Text(), nullable=False),
        sa.Column("branch", sa.Text(), nullable=False),
        sa.Column("in_flight", sa.Integer(), server_default="0", nullable=False),
        sa.Column("last_green_sha", sa.Text(), nullable=True),
        sa.Column("last_green_sequence", sa.BigInteger(), nullable=True),
        sa.Column("last_green_item_id", sa.Uuid(), nullable=True),
        sa.Column("latest_item_id", sa.Uuid(), nullable=True),
        sa.Column("latest_sequence", sa.BigInteger(), server_default="0", nullable=False),
        sa.Column("serial_until_green", sa.Boolean(), server_default=sa.false(), nullable=False),
        sa.Column("version", sa.BigInteger(), server_default="0", nullable=False),
        sa.Column(
            "updated_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.CheckConstraint("in_flight >= 0", name=op.f("ck_trunk_queues_in_flight_not_negative")),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_trunk_queues")),
        sa.UniqueConstraint("project", "branch", name=op.f("uq_trunk_queues_project_branch")),
    )
    op.create_table(
        "trunk_details",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("queue", sa.Text(), nullable=False),
        sa.Column("sequence", sa.BigInteger(), nullable=False),
        sa.Column("sha", sa.String(length=40), nullable=False),
        sa.Column(
            "state",
            _enum(
                "trunk_state",
                "accepted",
                "processing",
                "superseded",
                "succeeded",
                "failed",
                "cancelled",
            ),
            server_default="accepted",
            nullable=False,
        ),
        sa.Column("build_strategy", _enum("build_strategy", "incremental", "full"), nullable=True),
        sa.Column("base_sha", sa.String(length=40), nullable=True),
        sa.Column("admitted_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("pipeline_id", sa.BigInteger(), nullable=True),
        sa.Column("pipeline_url", sa.Text(), nullable=True),
        sa.Column("pipeline_status", sa.Text(), nullable=True),
        sa.Column("retired_pipeline_id", sa.BigInteger(), nullable=True),
        sa.Column("completion_reason", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(
            ["id"],
            ["work_items.id"],
            name=op.f("fk_trunk_details_id_work_items"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["queue"],
            ["trunk_queues.name"],
            name=op.f("fk_trunk_details_queue_trunk_queues"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_trunk_details")),
        sa.UniqueConstraint("queue", "sequence", name=op.f("uq_trunk_details_queue_sequence")),
        sa.UniqueConstraint("queue", "sha", name=op.f("uq_trunk_details_queue_sha")),
    )
    op.create_index(
        "ix_trunk_details_pipeline_id",
        "trunk_details",
        ["pipeline_id"],
        unique=False,
        postgresql_where=sa.text("pipeline_id IS NOT NULL"),
    )
    op.create_index(
        "ix_trunk_details_queue_state", "trunk_details", ["queue", "state"], unique=False
    )


def downgrade() -> None:
    op.drop_index("ix_trunk_details_queue_state", table_name="trunk_details")
    op.drop_index(
        "ix_trunk_details_pipeline_id",
        table_name="trunk_details",
        postgresql_where=sa.text("pipeline_id IS NOT NULL"),
    )
    op.drop_table("trunk_details")
    op.drop_table("trunk_queues")
