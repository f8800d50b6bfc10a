"""work_items: room on each page for a claim's new row version (fillfactor 50)

A claim and a heartbeat change only the lease columns (`leased_until`,
`lease_token`), which no index covers, so PostgreSQL can write the new row
version as a heap-only tuple (HOT): no entry in any of the table's eleven
indexes, much less WAL. HOT needs free space on the row's own page, and
rows inserted at the default fillfactor (100) fill their pages: measured on
the engine benchmark (N = 10,000 no-op items, W = 4), 1,290 of 20,000
updates were HOT at fillfactor 100, 4,546 at 70 and 8,733 at 50 (nearly
every claim: the other update of an item's round, going idle, changes
`actionable` and `updated_at`, which indexes cover, and is never HOT). WAL
fell from 2,264 to 1,518 bytes per item and the claim statement from about
100 to 28 µs per item. The cost is disk: new rows take twice the pages.

Only pages written from now on keep the space; existing rows get it as they
move (each non-HOT update writes the row to a page with room).

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-01 14:00:00
"""

from __future__ import annotations

from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("ALTER TABLE work_items SET (fillfactor = 50)")


def downgrade() -> None:
    op.execute("ALTER TABLE work_items RESET (fillfactor)")
