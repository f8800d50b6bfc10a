"""submission idempotency keys; the MR metadata the service set

- `submission_keys`: a caller's `Idempotency-Key` on `POST /api/work-items/mr`
  or `/trunk`, with the answer it got (status, outcome, item), for 24 hours.
  Its rows go with their item (ON DELETE CASCADE) and are pruned by the safety
  sweep once expired.
- `mr_details.mr_metadata_set`: digests of the title, draft flag, description
  and labels the service last set on the item's MR, so an update leaves what a
  person edited alone. Existing MRs start without it (NULL): their title and
  description are taken as the service's, and no label is removed from them.

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-09 10:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "submission_keys",
        sa.Column("caller_issuer", sa.Text(), nullable=False),
        sa.Column("caller_identity", sa.Text(), nullable=False),
        sa.Column("idempotency_key", sa.Text(), nullable=False),
        sa.Column("item_type", sa.String(length=64), nullable=False),
        sa.Column("request_digest", sa.Text(), nullable=False),
        sa.Column("work_item_id", sa.Uuid(), nullable=False),
        sa.Column("status_code", sa.SmallInteger(), nullable=False),
        sa.Column("outcome", sa.String(length=32), nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["work_item_id"],
            ["work_items.id"],
            name=op.f("fk_submission_keys_work_item_id_work_items"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint(
            "caller_issuer", "caller_identity", "idempotency_key", name=op.f("pk_submission_keys")
        ),
    )
    op.create_index("ix_submission_keys_work_item_id", "submission_keys", ["work_item_id"])
    op.create_index("ix_submission_keys_expires_at", "submission_keys", ["expires_at"])
    op.add_column(
        "mr_details",
        sa.Column("mr_metadata_set", postgresql.JSONB(astext_type=sa.Text()), nullable=True),
    )


def downgrade() -> None:
    op.drop_column("mr_details", "mr_metadata_set")
    op.drop_index("ix_submission_keys_expires_at", table_name="submission_keys")
    op.drop_index("ix_submission_keys_work_item_id", table_name="submission_keys")
    op.drop_table("submission_keys")
