"""reserved

A placeholder on the linear chain so pieces built side by side each own one
revision; it changes nothing until its owner fills it in.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-01 10:30:00
"""

from __future__ import annotations

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
