"""The outbox table: outbound events waiting for (or done with) delivery to a subscriber."""

from __future__ import annotations

import enum
import uuid
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, mapped_column

from workqueue.queue.models import Base


class DeliveryStatus(enum.StrEnum):
    """Where one event stands with one subscriber."""

    PENDING = "pending"  # not yet accepted by the subscriber; due at next_attempt_at
    DELIVERED = "delivered"  # the subscriber answered 2xx
    ABANDONED = "abandoned"  # still failing after max_age_seconds; last_error says why


class OutboxDelivery(Base):
    """One event for one subscriber, written in the transaction of the change it announces.

    Rows of the same event share `event_id`, which is also the Standard
    Webhooks `webhook-id` (`msg_<hex>`): the same on every retry, so receivers
    de-duplicate on it.
    """

    __tablename__ = "outbox_deliveries"

    id: Mapped[int] = mapped_column(sa.BigInteger, sa.Identity(), primary_key=True)
    event_id: Mapped[uuid.UUID] = mapped_column(sa.Uuid, nullable=False)
    subscriber: Mapped[str] = mapped_column(sa.String(64), nullable=False)
    event_type: Mapped[str] = mapped_column(sa.String(64), nullable=False)
    # No foreign key: the record of what was announced outlives the item.
    work_item_id: Mapped[uuid.UUID | None] = mapped_column(sa.Uuid)
    data: Mapped[dict[str, Any]] = mapped_column(JSONB, nullable=False)
    status: Mapped[DeliveryStatus] = mapped_column(
        sa.Enum(
            DeliveryStatus,
            name="delivery_status",
            native_enum=False,
            create_constraint=True,
            length=32,
            values_callable=lambda members: [member.value for member in members],
            validate_strings=True,
        ),
        nullable=False,
        server_default=DeliveryStatus.PENDING.value,
    )
    attempts: Mapped[int] = mapped_column(sa.Integer, nullable=False, server_default="0")
    next_attempt_at: Mapped[datetime] = mapped_column(
        sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
    )
    last_error: Mapped[str | None] = mapped_column(sa.Text)
    # The event's time (the announcing transaction's): the body's `timestamp`
    # and the start of its max_age_seconds.
    created_at: Mapped[datetime] = mapped_column(
        sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
    )
    delivered_at: Mapped[datetime | None] = mapped_column(sa.DateTime(timezone=True))
    abandoned_at: Mapped[datetime | None] = mapped_column(sa.DateTime(timezone=True))

    __table_args__ = (
        # Claims and the delivery timer only look at pending rows: their cost
        # follows the backlog, not the history.
        sa.Index(
            "ix_outbox_deliveries_due",
            "next_attempt_at",
            postgresql_where=sa.text("status = 'pending'"),
        ),
        # The safety sweep prunes old delivered rows.
        sa.Index(
            "ix_outbox_deliveries_delivered_at",
            "delivered_at",
            postgresql_where=sa.text("status = 'delivered'"),
        ),
        # `prune` deletes a finished item's deliveries with it (migration 0011).
        sa.Index(
            "ix_outbox_deliveries_work_item_id",
            "work_item_id",
            postgresql_where=sa.text("work_item_id IS NOT NULL"),
        ),
        sa.CheckConstraint("attempts >= 0", name="attempts_not_negative"),
    )
