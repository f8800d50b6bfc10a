"""work_items: the project index carries the id, so the attention reconciler walks a project

The attention reconciler passes over one project (its scope) in id order, a
page of 100 after the last id it saw. With an index on `project_path` alone,
PostgreSQL answered each page by intersecting every row of the project with
the rest of the id range, so a page's cost grew with the table: about 10 ms
at 550,000 items, and the first pass over 1.1M items took 878 s. Indexed on
`(project_path, id)`, a page is one index range read that stops after 100
rows. The new index also serves every lookup the old one did (its first
column), so the old one goes.

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-01 17:45:00
"""

from __future__ import annotations

from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_work_items_project_path_id", "work_items", ["project_path", "id"])
    op.drop_index("ix_work_items_project_path", table_name="work_items")


def downgrade() -> None:
    op.create_index("ix_work_items_project_path", "work_items", ["project_path"])
    op.drop_index("ix_work_items_project_path_id", table_name="work_items")
