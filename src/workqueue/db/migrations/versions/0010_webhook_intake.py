"""webhook intake

Webhook resolution finds the active items of a hook's project by their
canonical project path: a partial index of active items by `project_path`.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-01 10:30:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index(
        "ix_work_items_active_project_path",
        "work_items",
        ["project_path"],
        postgresql_where=sa.text("phase = 'active'"),
    )


def downgrade() -> None:
    op.drop_index("ix_work_items_active_project_path", table_name="work_items")
