"""mr_details: the item's creation time beside project and package, for their lists

The MR list pages newest first on `(created_at, id)`. Filtered by `project`
or `package`, both `mr_details` columns, PostgreSQL could either walk
`work_items` newest first and test every row's detail until a page matched
(reading tens of thousands of rows at 1.1M items) or read the filter's rows
and sort them: the page cost grew with the table (at 1.1M, p50 198 ms for a
project page, 343 ms for a package page, with one client). A copy of
`work_items.created_at` in `mr_details`, indexed after each filter column,
lets those lists walk one index and stop after the page.

The copy is written by a trigger from the `work_items` row inserted just
before it (joined inheritance inserts the base row first), so it equals the
original to the microsecond whoever inserts; `created_at` never changes.

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-01 14:40:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None

_COPY_FUNCTION = """
CREATE FUNCTION workqueue_mr_details_created_at() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    SELECT created_at INTO NEW.item_created_at FROM work_items WHERE id = NEW.id;
    RETURN NEW;
END
$$
"""


def upgrade() -> None:
    op.add_column(
        "mr_details", sa.Column("item_created_at", sa.DateTime(timezone=True), nullable=True)
    )
    op.execute(
        "UPDATE mr_details SET item_created_at = item.created_at"
        " FROM work_items AS item WHERE item.id = mr_details.id"
    )
    op.alter_column("mr_details", "item_created_at", nullable=False)
    op.execute(_COPY_FUNCTION)
    op.execute(
        "CREATE TRIGGER mr_details_created_at BEFORE INSERT ON mr_details"
        " FOR EACH ROW EXECUTE FUNCTION workqueue_mr_details_created_at()"
    )
    op.create_index(
        "ix_mr_details_project_item_created_at_id",
        "mr_details",
        ["project", "item_created_at", "id"],
    )
    op.create_index(
        "ix_mr_details_package_item_created_at_id",
        "mr_details",
        ["package", "item_created_at", "id"],
    )
    # The package list's old index is a prefix of the new one.
    op.drop_index("ix_mr_details_package", table_name="mr_details")


def downgrade() -> None:
    op.create_index("ix_mr_details_package", "mr_details", ["package"])
    op.drop_index("ix_mr_details_package_item_created_at_id", table_name="mr_details")
    op.drop_index("ix_mr_details_project_item_created_at_id", table_name="mr_details")
    op.execute("DROP TRIGGER mr_details_created_at ON mr_details")
    op.execute("DROP FUNCTION workqueue_mr_details_created_at()")
    op.drop_column("mr_details", "item_created_at")
