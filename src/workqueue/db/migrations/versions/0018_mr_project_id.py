"""mr_details.project_id: the GitLab project's numeric id, for hooks that name only it

Job Hooks of GitLab before 16.0 carry no `project` object, only `project_id`,
so they named no item: items were found by their canonical project path
alone. The item now keeps its project's id too (filled from GitLab's project
answer, which the service already reads and caches), and a hook without a path
finds the active items whose `project_id` it names. Existing items start
without it (NULL) and get it at their next drift check.

The index is partial: most rows of a long history are finished items whose id
was never recorded, and a hook asks only for ids that are there.

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-10 10:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("mr_details", sa.Column("project_id", sa.BigInteger(), nullable=True))
    op.create_index(
        "ix_mr_details_project_id",
        "mr_details",
        ["project_id"],
        postgresql_where=sa.text("project_id IS NOT NULL"),
    )


def downgrade() -> None:
    op.drop_index("ix_mr_details_project_id", table_name="mr_details")
    op.drop_column("mr_details", "project_id")
