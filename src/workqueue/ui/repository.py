"""The dashboard's one query of its own: what an item's waiting events are, without bodies.

The engine reads pending events with their (large) webhook bodies to apply
them; the item page only names them, so it reads two columns.
"""

from __future__ import annotations

import uuid
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.orm import Session

from workqueue.queue.models import PendingEvent


def pending_event_summaries(session: Session, item_id: uuid.UUID) -> list[tuple[str, datetime]]:
    """(event type, received at) of the item's unapplied events, oldest first."""
    rows = session.execute(
        sa.select(PendingEvent.event_type, PendingEvent.received_at)
        .where(PendingEvent.work_item_id == item_id)
        .order_by(PendingEvent.id)
    )
    return [(event_type, received_at) for event_type, received_at in rows]
