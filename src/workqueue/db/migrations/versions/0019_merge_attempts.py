"""mr_details.merge_attempts: what reconcile_mr tried for the MR's current head

GitLab refusing a merge is retried with a backoff (30 s doubling up to
`merge_retry_max_seconds`) that must survive the step, the process and every
event in between; a rebase the service asked for, and the merge-train cars it
added (a dropped car is re-added once), must be known at the next look. One
JSONB value (`types.mr.merge_attempts.MergeAttempts`), about one head: a new
head starts afresh. Existing items start without it (NULL): nothing tried yet.

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-11 10:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column(
        "mr_details",
        sa.Column("merge_attempts", postgresql.JSONB(astext_type=sa.Text()), nullable=True),
    )


def downgrade() -> None:
    op.drop_column("mr_details", "merge_attempts")
