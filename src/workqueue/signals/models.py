"""The signal store: the newest signal per check and component of a commit, and the
`Idempotency-Key`s reporters sent."""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.orm import Mapped, mapped_column

from workqueue.queue.models import Base


class CheckSignal(Base):
    """The newest signal of (`name`, `variant`) on commit `sha` of `project`.

    Kept whether or not an item has that commit yet: a build may report before
    the merge is seen. Rows older than the retention are pruned.
    """

    __tablename__ = "check_signals"

    project: Mapped[str] = mapped_column(sa.Text, primary_key=True)
    sha: Mapped[str] = mapped_column(sa.Text, primary_key=True)
    name: Mapped[str] = mapped_column(sa.Text, primary_key=True)
    variant: Mapped[str] = mapped_column(sa.Text, primary_key=True)
    status: Mapped[str] = mapped_column(sa.String(16), nullable=False)
    url: Mapped[str | None] = mapped_column(sa.Text)
    description: Mapped[str | None] = mapped_column(sa.Text)
    # The reporter's time (orders signals); when the service stored it (retention).
    reported_at: Mapped[datetime] = mapped_column(sa.DateTime(timezone=True), nullable=False)
    received_at: Mapped[datetime] = mapped_column(
        sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
    )
    source: Mapped[str] = mapped_column(sa.String(16), nullable=False)
    reporter: Mapped[str] = mapped_column(sa.Text, nullable=False)

    __table_args__ = (
        sa.CheckConstraint(
            "status IN ('pending', 'running', 'success', 'failed', 'canceled')",
            name="ck_check_signals_status",
        ),
        sa.Index("ix_check_signals_received_at", "received_at"),
    )


class SignalKey(Base):
    """A reporter's `Idempotency-Key`: the same key again is a duplicate, changing nothing."""

    __tablename__ = "signal_keys"

    reporter: Mapped[str] = mapped_column(sa.Text, primary_key=True)
    idempotency_key: Mapped[str] = mapped_column(sa.Text, primary_key=True)
    received_at: Mapped[datetime] = mapped_column(
        sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
    )

    __table_args__ = (sa.Index("ix_signal_keys_received_at", "received_at"),)
