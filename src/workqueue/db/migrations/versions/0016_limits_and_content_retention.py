"""limits a ref cannot multiply, stored bytes, retention of contents

- `work_items.limit_key`: what `authorization.limits` counts the owner as (its
  identity, or the claim its rule names in `limit_key`, e.g. `project_path`).
  Owned items get `identity:<caller_identity>`, what they were counted as.
- `work_items.content_bytes`: bytes of the text the caller made the service
  store for the item, summed per caller for `max_stored_bytes_per_caller`;
  filled here from `mr_details` as submissions count them
  (`types.mr.stored_bytes`: UTF-8 bytes of the title, description, commit
  message, labels, package, change kind, file paths and contents).
- `work_items.contents_dropped_at`: when the safety sweep dropped the contents
  (for mr: file contents, description, commit message) after
  `retention.content_days`.
- `project_submission_windows`: submissions per project per minute.
- `caller_submission_windows.caller_identity` becomes `limit_key`; its rows
  (one minute's counts) are cleared rather than converted.
- Indexes: the caller's live items by limit key (replacing the one by
  identity), its stored bytes, a project's live items, and each type's finished
  items not yet emptied.

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-02 10:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None

_LIVE = sa.text("phase NOT IN ('completed', 'cancelled')")
_HOLDS_CONTENTS = sa.text("content_bytes > 0")
_FINISHED_HOLDING = sa.text(
    "contents_dropped_at IS NULL AND phase IN ('completed', 'failed', 'cancelled')"
)


def upgrade() -> None:
    op.add_column("work_items", sa.Column("limit_key", sa.Text(), nullable=True))
    op.add_column(
        "work_items",
        sa.Column("content_bytes", sa.BigInteger(), server_default="0", nullable=False),
    )
    op.add_column(
        "work_items",
        sa.Column("contents_dropped_at", sa.DateTime(timezone=True), nullable=True),
    )
    # One rewrite of each row that needs either value. The count is written out
    # here rather than imported: a migration must not change when the code does.
    op.execute(
        """
        UPDATE work_items AS item SET
            limit_key = CASE WHEN item.caller_issuer IS NOT NULL
                             THEN 'identity:' || item.caller_identity END,
            content_bytes = coalesce((
                SELECT octet_length(details.title)
                    + coalesce(octet_length(details.description), 0)
                    + octet_length(details.commit_message)
                    + coalesce(octet_length(details.package), 0)
                    + coalesce(octet_length(details.change_kind), 0)
                    + (SELECT coalesce(sum(octet_length(label)), 0)
                       FROM jsonb_array_elements_text(details.labels) AS label)
                    + (SELECT coalesce(sum(octet_length(action ->> 'file_path')), 0)
                            + coalesce(sum(octet_length(action ->> 'previous_path')), 0)
                            + coalesce(sum(octet_length(action ->> 'content')), 0)
                       FROM jsonb_array_elements(details.file_actions) AS action)
                FROM mr_details AS details WHERE details.id = item.id
            ), 0)
        WHERE item.caller_issuer IS NOT NULL OR item.item_type = 'mr'
        """
    )
    op.drop_index("ix_work_items_caller_live", table_name="work_items", postgresql_where=_LIVE)
    op.create_index(
        "ix_work_items_limit_key_live",
        "work_items",
        ["caller_issuer", "limit_key"],
        postgresql_where=_LIVE,
    )
    op.create_index(
        "ix_work_items_limit_key_content_bytes",
        "work_items",
        ["caller_issuer", "limit_key", "content_bytes"],
        postgresql_where=_HOLDS_CONTENTS,
    )
    op.create_index(
        "ix_work_items_live_project_path", "work_items", ["project_path"], postgresql_where=_LIVE
    )
    op.create_index(
        "ix_work_items_contents_held_updated_at",
        "work_items",
        ["item_type", "updated_at"],
        postgresql_where=_FINISHED_HOLDING,
    )
    op.execute("DELETE FROM caller_submission_windows")
    op.alter_column("caller_submission_windows", "caller_identity", new_column_name="limit_key")
    op.create_table(
        "project_submission_windows",
        sa.Column("project_path", sa.Text(), nullable=False),
        sa.Column("window_start", sa.DateTime(timezone=True), nullable=False),
        sa.Column("submissions", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint(
            "project_path", "window_start", name=op.f("pk_project_submission_windows")
        ),
    )


def downgrade() -> None:
    op.drop_table("project_submission_windows")
    op.execute("DELETE FROM caller_submission_windows")
    op.alter_column("caller_submission_windows", "limit_key", new_column_name="caller_identity")
    op.drop_index(
        "ix_work_items_contents_held_updated_at",
        table_name="work_items",
        postgresql_where=_FINISHED_HOLDING,
    )
    op.drop_index(
        "ix_work_items_live_project_path", table_name="work_items", postgresql_where=_LIVE
    )
    op.drop_index(
        "ix_work_items_limit_key_content_bytes",
        table_name="work_items",
        postgresql_where=_HOLDS_CONTENTS,
    )
    op.drop_index("ix_work_items_limit_key_live", table_name="work_items", postgresql_where=_LIVE)
    op.create_index(
        "ix_work_items_caller_live",
        "work_items",
        ["caller_issuer", "caller_identity"],
        postgresql_where=_LIVE,
    )
    op.drop_column("work_items", "contents_dropped_at")
    op.drop_column("work_items", "content_bytes")
    op.drop_column("work_items", "limit_key")
