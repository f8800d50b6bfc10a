"""Tables of the attention queues: the queues and their (unique) memberships."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, mapped_column

from workqueue.queue.models import Base


class AttentionQueue(Base):
    """A queue as the config last described it; its row is also the queue's lock."""

    __tablename__ = "attention_queues"

    id: Mapped[int] = mapped_column(sa.BigInteger, sa.Identity(), primary_key=True)
    name: Mapped[str] = mapped_column(sa.String(63), nullable=False, unique=True)
    description: Mapped[str] = mapped_column(sa.Text, nullable=False, server_default="")
    match: Mapped[dict[str, Any]] = mapped_column(JSONB, nullable=False, server_default="{}")
    prune: Mapped[bool] = mapped_column(sa.Boolean, nullable=False, server_default=sa.false())
    enabled: Mapped[bool] = mapped_column(sa.Boolean, nullable=False, server_default=sa.true())
    # Set when the queue left the config: it is no longer served or kept, but
    # its memberships survive in case it comes back.
    retired_at: Mapped[datetime | None] = mapped_column(sa.DateTime(timezone=True))
    updated_at: Mapped[datetime] = mapped_column(
        sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
    )


class AttentionMembership(Base):
    """An item in a queue — or, with `removed_at`, an item a person took out of it.

    A hand-removed row stays as the marker that keeps the rule from adding the
    item back; `removed_fingerprint` is what the rule saw of the item then, so
    the item counts as "changed again" once that differs.
    """

    __tablename__ = "attention_memberships"

    queue_id: Mapped[int] = mapped_column(
        sa.ForeignKey("attention_queues.id", ondelete="CASCADE"), primary_key=True
    )
    work_item_id: Mapped[uuid.UUID] = mapped_column(
        sa.ForeignKey("work_items.id", ondelete="CASCADE"), primary_key=True
    )
    added_at: Mapped[datetime] = mapped_column(
        sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
    )
    added_by: Mapped[str] = mapped_column(sa.Text, nullable=False)  # "rule" or a caller
    removed_at: Mapped[datetime | None] = mapped_column(sa.DateTime(timezone=True))
    removed_by: Mapped[str | None] = mapped_column(sa.Text)
    removed_fingerprint: Mapped[str | None] = mapped_column(sa.Text)

    __table_args__ = (
        # Reconciliation reads a page of items' memberships by item.
        sa.Index("ix_attention_memberships_work_item_id", "work_item_id"),
        # Queue pages and sizes count current members only.
        sa.Index(
            "ix_attention_memberships_current",
            "queue_id",
            postgresql_where=sa.text("removed_at IS NULL"),
        ),
    )
