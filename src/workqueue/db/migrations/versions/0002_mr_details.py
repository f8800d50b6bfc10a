"""mr details

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-29 23:00:38.193306
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "mr_details",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("project", sa.Text(), nullable=False),
        sa.Column("source_branch", sa.Text(), nullable=False),
        sa.Column("target_branch", sa.Text(), nullable=True),
        sa.Column("package", sa.Text(), nullable=True),
        sa.Column("change_kind", sa.Text(), nullable=True),
        sa.Column("title", sa.Text(), nullable=False),
        sa.Column("description", sa.Text(), nullable=True),
        sa.Column(
            "labels", postgresql.JSONB(astext_type=sa.Text()), server_default="[]", nullable=False
        ),
        sa.Column("auto_merge", sa.Boolean(), server_default=sa.text("true"), nullable=False),
        sa.Column("commit_message", sa.Text(), nullable=False),
        sa.Column("file_actions", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("content_hash", sa.Text(), nullable=False),
        sa.Column("mr_iid", sa.Integer(), nullable=True),
        sa.Column("mr_url", sa.Text(), nullable=True),
        sa.Column("mr_sha", sa.Text(), nullable=True),
        sa.Column("head_pipeline_id", sa.BigInteger(), nullable=True),
        sa.Column("detailed_merge_status", sa.Text(), nullable=True),
        sa.Column("completion_reason", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(
            ["id"], ["work_items.id"], name=op.f("fk_mr_details_id_work_items"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_mr_details")),
    )
    op.create_index(
        "ix_mr_details_head_pipeline_id",
        "mr_details",
        ["head_pipeline_id"],
        unique=False,
        postgresql_where=sa.text("head_pipeline_id IS NOT NULL"),
    )
    op.create_index(
        "ix_mr_details_project_mr_iid", "mr_details", ["project", "mr_iid"], unique=False
    )
    op.create_index(
        "ix_mr_details_project_source_branch",
        "mr_details",
        ["project", "source_branch"],
        unique=False,
    )


def downgrade() -> None:
    op.drop_index("ix_mr_details_project_source_branch", table_name="mr_details")
    op.drop_index("ix_mr_details_project_mr_iid", table_name="mr_details")
    op.drop_index(
        "ix_mr_details_head_pipeline_id",
        table_name="mr_details",
        postgresql_where=sa.text("head_pipeline_id IS NOT NULL"),
    )
    op.drop_table("mr_details")
