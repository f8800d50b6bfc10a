"""The intake table: deliveries stored by the receivers, waiting to be resolved."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, mapped_column

from workqueue.queue.models import Base


class IncomingDelivery(Base):
    """One accepted delivery (webhook, SQS message) not yet turned into item events.

    Written in the receiver's transaction together with its `received_deliveries`
    row (the durable de-duplication); deleted in the transaction that stores its
    pending events, so each distinct delivery is applied exactly once.
    """

    __tablename__ = "incoming_deliveries"

    id: Mapped[int] = mapped_column(sa.BigInteger, sa.Identity(), primary_key=True)
    # As stored in received_deliveries; None: the source gave no key (no de-duplication).
    delivery_key: Mapped[str | None] = mapped_column(sa.Text)
    source: Mapped[str] = mapped_column(sa.String(32), nullable=False)
    event_type: Mapped[str] = mapped_column(sa.String(64), nullable=False)
    body: Mapped[dict[str, Any]] = mapped_column(JSONB, nullable=False)
    received_at: Mapped[datetime] = mapped_column(
        sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
    )
