"""attention

Reserved for attention queues and their memberships; filled in by the change
that adds it. Until then it changes nothing, so the revision chain stays
linear while the pieces are built side by side.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-01 08:30:00
"""

from __future__ import annotations

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
