"""agent_details: the `agent` type's row per note that called the agent

One row per note (`note_id` unique: a redelivered Note Hook creates nothing),
the author's access when it was taken, the placeholder the service posted and
edited into the reply, the agent's answer and the `mr` item its changes
became. Rows of one discussion share a `session_id`: the conversation's
history is read from them.

Revision ID: 0022
Revises: 0021
Create Date: 2026-12-03 13:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None

STATES = ("queued", "calling", "replied", "failed", "rate_limited")


def upgrade() -> None:
    op.create_table(
        "agent_details",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("project", sa.Text(), nullable=False),
        sa.Column("project_id", sa.BigInteger(), nullable=False),
        sa.Column("noteable_type", sa.String(length=16), nullable=False),
        sa.Column("noteable_iid", sa.BigInteger(), nullable=False),
        sa.Column("note_id", sa.BigInteger(), nullable=False),
        sa.Column("discussion_id", sa.Text(), nullable=True),
        sa.Column("note_url", sa.Text(), nullable=True),
        sa.Column("author", sa.Text(), nullable=False),
        sa.Column("author_id", sa.BigInteger(), nullable=False),
        sa.Column("author_access", sa.Integer(), nullable=False),
        sa.Column("request", sa.Text(), nullable=False),
        sa.Column("internal", sa.Boolean(), server_default=sa.false(), nullable=False),
        sa.Column("session_id", sa.Uuid(), nullable=False),
        sa.Column(
            "state",
            sa.Enum(
                *STATES, name="agent_state", native_enum=False, create_constraint=True, length=32
            ),
            server_default="queued",
            nullable=False,
        ),
        sa.Column("reply_note_id", sa.BigInteger(), nullable=True),
        sa.Column("reply", sa.Text(), nullable=True),
        sa.Column("changes", postgresql.JSONB(astext_type=sa.Text()), nullable=True),
        sa.Column("changes_refused", sa.Text(), nullable=True),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("mr_item_id", sa.Uuid(), nullable=True),
        sa.Column("agent_calls", sa.Integer(), server_default="0", nullable=False),
        sa.ForeignKeyConstraint(
            ["id"],
            ["work_items.id"],
            name=op.f("fk_agent_details_id_work_items"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_agent_details")),
        sa.UniqueConstraint("note_id", name=op.f("uq_agent_details_note_id")),
    )
    op.create_index("ix_agent_details_session_id", "agent_details", ["session_id"])
    op.create_index("ix_agent_details_author_id", "agent_details", ["author_id"])
    op.create_index("ix_agent_details_project_id", "agent_details", ["project_id"])


def downgrade() -> None:
    op.drop_index("ix_agent_details_project_id", table_name="agent_details")
    op.drop_index("ix_agent_details_author_id", table_name="agent_details")
    op.drop_index("ix_agent_details_session_id", table_name="agent_details")
    op.drop_table("agent_details")
