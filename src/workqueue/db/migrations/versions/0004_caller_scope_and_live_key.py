"""caller scope and live key

Who owns an item (`caller_issuer` next to `caller_identity`), which project
authorization scopes it by (`project_path`), one live item per natural
identity enforced by the database (`live_key`), and the per-caller
submission counters.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01 08:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

_LIVE = sa.text("phase NOT IN ('completed', 'cancelled')")


def upgrade() -> None:
    op.add_column("work_items", sa.Column("caller_issuer", sa.Text(), nullable=True))
    op.add_column("work_items", sa.Column("project_path", sa.Text(), nullable=True))
    op.add_column("work_items", sa.Column("live_key", sa.Text(), nullable=True))
    # Existing MR items: scope by the project as submitted (a numeric id stays
    # numeric: only rules listing it, or `**`, reach it), and give the live
    # key to the newest live generation of each branch (older live duplicates,
    # which the missing constraint allowed, keep none rather than failing the
    # upgrade; they can still be cancelled).
    op.execute(
        "UPDATE work_items SET project_path = mr.project "
        "FROM mr_details AS mr WHERE mr.id = work_items.id"
    )
    op.execute(
        "UPDATE work_items SET live_key = newest.key FROM ("
        "  SELECT DISTINCT ON (mr.project, mr.source_branch) w.id,"
        "         'mr:' || mr.project || ':' || mr.source_branch AS key"
        "  FROM work_items AS w JOIN mr_details AS mr ON mr.id = w.id"
        "  WHERE w.phase NOT IN ('completed', 'cancelled')"
        "  ORDER BY mr.project, mr.source_branch, w.generation DESC"
        ") AS newest WHERE newest.id = work_items.id"
    )
    op.create_index(
        "uq_work_items_live_key", "work_items", ["live_key"], unique=True, postgresql_where=_LIVE
    )
    op.create_index(
        "ix_work_items_caller_live",
        "work_items",
        ["caller_issuer", "caller_identity"],
        postgresql_where=_LIVE,
    )
    op.create_index("ix_work_items_project_path", "work_items", ["project_path"])
    op.create_table(
        "caller_submission_windows",
        sa.Column("caller_issuer", sa.Text(), nullable=False),
        sa.Column("caller_identity", sa.Text(), nullable=False),
        sa.Column("window_start", sa.DateTime(timezone=True), nullable=False),
        sa.Column("submissions", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint(
            "caller_issuer",
            "caller_identity",
            "window_start",
            name=op.f("pk_caller_submission_windows"),
        ),
    )


def downgrade() -> None:
    op.drop_table("caller_submission_windows")
    op.drop_index("ix_work_items_project_path", table_name="work_items")
    op.drop_index("ix_work_items_caller_live", table_name="work_items", postgresql_where=_LIVE)
    op.drop_index("uq_work_items_live_key", table_name="work_items", postgresql_where=_LIVE)
    op.drop_column("work_items", "live_key")
    op.drop_column("work_items", "project_path")
    op.drop_column("work_items", "caller_issuer")
