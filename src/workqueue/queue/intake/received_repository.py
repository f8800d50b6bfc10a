"""Durable de-duplication of incoming events: the `received_deliveries` table.

Webhook deliveries and SQS messages carry a delivery key; one recorded before is a
redelivery (see `workqueue.queue.intake.pending_events`). Nothing here commits.
"""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.orm import Session


def record_delivery(session: Session, *, delivery_key: str, source: str, event_type: str) -> bool:
    """Remember a delivery; False when the key was recorded before (a redelivery).

    A concurrent transaction recording the same key makes this wait for it:
    exactly one of them sees True.
    """
    row = session.execute(
        sa.text(
            "INSERT INTO received_deliveries (delivery_key, source, event_type) "
            "VALUES (:delivery_key, :source, :event_type) "
            "ON CONFLICT (delivery_key) DO NOTHING RETURNING delivery_key"
        ),
        {"delivery_key": delivery_key, "source": source, "event_type": event_type},
    ).first()
    return row is not None


def prune_deliveries_older_than(session: Session, seconds: float) -> int:
    """Forget deliveries received more than `seconds` ago (database clock); returns the count."""
    deleted: int = session.execute(
        sa.text(
            "WITH gone AS ("
            "  DELETE FROM received_deliveries "
            "  WHERE received_at < now() - make_interval(secs => :seconds) RETURNING 1"
            ") SELECT count(*) FROM gone"
        ),
        {"seconds": seconds},
    ).scalar_one()
    return deleted
