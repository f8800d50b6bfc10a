"""outbox

Reserved for the outbox of outbound events (Standard Webhooks deliveries);
filled in by the change that adds it. Until then it changes nothing, so the
revision chain stays linear while the pieces are built side by side.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01 08:30:00
"""

from __future__ import annotations

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
