"""mr_details.checks: the before-merge checks an MR item shows for its head commit

`checks.before_merge` gates the merge on the MR head's checks; the item keeps
what it last read of them (name, variant, status, link, time) so people see
them on the item page and in `status --id`. NULL for items that have none.

Revision ID: 0021
Revises: 0020
Create Date: 2026-12-03 12:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column(
        "mr_details",
        sa.Column("checks", postgresql.JSONB(astext_type=sa.Text()), nullable=True),
    )


def downgrade() -> None:
    op.drop_column("mr_details", "checks")
