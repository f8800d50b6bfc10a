"""trunk

Reserved for the trunk item type (trunk_queues, trunk_details); filled in by
the change that adds it. Until then it changes nothing, so the revision
chain stays linear while the pieces are built side by side.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01 08:30:00
"""

from __future__ import annotations

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
