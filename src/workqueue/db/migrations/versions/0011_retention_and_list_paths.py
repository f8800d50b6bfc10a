"""retention and list access paths

Measured at 1.1M MR items (benchmarks/scale.py):

* `workqueue-service prune` takes the oldest finished items batch by batch:
  a partial index of finished items by `updated_at`, and one of outbox
  deliveries by item, so each batch is index probes rather than two scans;
* lists filtered on a phase alone (the MR list; the generic list without a
  type) walk `(phase, created_at, id)`, so the last pages of `phase=active`
  stop at the oldest active item instead of reading past every finished one
  (not a partial index: the phase is a bound parameter, and a prepared
  statement's generic plan cannot prove a partial index's predicate);
* MR lists filtered on `source_branch` or `package` alone (the existing
  index leads with `project`) get an index each.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-01 10:45:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index(
        "ix_work_items_finished_updated_at",
        "work_items",
        ["updated_at"],
        postgresql_where=sa.text("phase IN ('completed', 'failed', 'cancelled')"),
    )
    op.create_index(
        "ix_work_items_phase_created_at_id", "work_items", ["phase", "created_at", "id"]
    )
    op.create_index("ix_mr_details_source_branch", "mr_details", ["source_branch"])
    op.create_index("ix_mr_details_package", "mr_details", ["package"])
    op.create_index(
        "ix_outbox_deliveries_work_item_id",
        "outbox_deliveries",
        ["work_item_id"],
        postgresql_where=sa.text("work_item_id IS NOT NULL"),
    )


def downgrade() -> None:
    op.drop_index("ix_outbox_deliveries_work_item_id", table_name="outbox_deliveries")
    op.drop_index("ix_mr_details_package", table_name="mr_details")
    op.drop_index("ix_mr_details_source_branch", table_name="mr_details")
    op.drop_index("ix_work_items_phase_created_at_id", table_name="work_items")
    op.drop_index("ix_work_items_finished_updated_at", table_name="work_items")
