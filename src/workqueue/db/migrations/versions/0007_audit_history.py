"""audit history

Reserved for audit entries kept in the database (per-item history); filled
in by the change that adds it. Until then it changes nothing, so the
revision chain stays linear while the pieces are built side by side.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-01 08:30:00
"""

from __future__ import annotations

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
