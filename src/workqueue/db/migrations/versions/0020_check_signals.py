"""External checks: the signal store, reporters' keys, and an MR item's life after the merge

`check_signals` holds the newest signal per (project, sha, name, variant);
`signal_keys` the `Idempotency-Key`s reporters sent. `mr_details` gains the
merge commit (signals after the merge are about it) and `post_merge`: the
checks an item waits for once merged. Existing items have neither (NULL):
they merged before checks existed.

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-03 10:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "check_signals",
        sa.Column("project", sa.Text(), nullable=False),
        sa.Column("sha", sa.Text(), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("variant", sa.Text(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("url", sa.Text(), nullable=True),
        sa.Column("description", sa.Text(), nullable=True),
        sa.Column("reported_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column(
            "received_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column("source", sa.String(length=16), nullable=False),
        sa.Column("reporter", sa.Text(), nullable=False),
        sa.CheckConstraint(
            "status IN ('pending', 'running', 'success', 'failed', 'canceled')",
            name="ck_check_signals_status",
        ),
        sa.PrimaryKeyConstraint("project", "sha", "name", "variant"),
    )
    op.create_index("ix_check_signals_received_at", "check_signals", ["received_at"])
    op.create_table(
        "signal_keys",
        sa.Column("reporter", sa.Text(), nullable=False),
        sa.Column("idempotency_key", sa.Text(), nullable=False),
        sa.Column(
            "received_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.PrimaryKeyConstraint("reporter", "idempotency_key"),
    )
    op.create_index("ix_signal_keys_received_at", "signal_keys", ["received_at"])
    op.add_column("mr_details", sa.Column("merge_commit_sha", sa.Text(), nullable=True))
    op.add_column(
        "mr_details",
        sa.Column("post_merge", postgresql.JSONB(astext_type=sa.Text()), nullable=True),
    )
    # Signals find the items of their commit after the merge by it.
    op.create_index(
        "ix_mr_details_merge_commit_sha",
        "mr_details",
        ["merge_commit_sha"],
        postgresql_where=sa.text("merge_commit_sha IS NOT NULL"),
    )


def downgrade() -> None:
    op.drop_index("ix_mr_details_merge_commit_sha", table_name="mr_details")
    op.drop_column("mr_details", "post_merge")
    op.drop_column("mr_details", "merge_commit_sha")
    op.drop_index("ix_signal_keys_received_at", table_name="signal_keys")
    op.drop_table("signal_keys")
    op.drop_index("ix_check_signals_received_at", table_name="check_signals")
    op.drop_table("check_signals")
