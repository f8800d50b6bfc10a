"""The `submission_keys` table: a caller's `Idempotency-Key` and the answer it got."""

from __future__ import annotations

import uuid
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.orm import Mapped, mapped_column

from workqueue.queue.models import Base


class SubmissionKey(Base):
    """One caller's `Idempotency-Key` on a submission, kept until `expires_at` (24 h).

    A repeat of the key by the same caller gets the recorded answer again
    (`status_code`, `outcome`, the item as it is then) and changes nothing; the
    same key with another request (`request_digest`) is refused. Only answers
    that stored an item are recorded: a refusal leaves no row, so a resend after
    it is a new attempt. The row goes with its item (retention deletes it) and
    the safety sweep deletes expired rows.
    """

    __tablename__ = "submission_keys"

    # Keys are per caller: subjects are unique per issuer, as for ownership.
    caller_issuer: Mapped[str] = mapped_column(sa.Text, primary_key=True)
    caller_identity: Mapped[str] = mapped_column(sa.Text, primary_key=True)
    idempotency_key: Mapped[str] = mapped_column(sa.Text, primary_key=True)
    item_type: Mapped[str] = mapped_column(sa.String(64), nullable=False)
    # sha256 over the item type and the body as parsed: what "the same request" means.
    request_digest: Mapped[str] = mapped_column(sa.Text, nullable=False)
    work_item_id: Mapped[uuid.UUID] = mapped_column(
        sa.ForeignKey("work_items.id", ondelete="CASCADE"), nullable=False
    )
    status_code: Mapped[int] = mapped_column(sa.SmallInteger, nullable=False)
    outcome: Mapped[str] = mapped_column(sa.String(32), nullable=False)
    created_at: Mapped[datetime] = mapped_column(
        sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
    )
    expires_at: Mapped[datetime] = mapped_column(sa.DateTime(timezone=True), nullable=False)

    __table_args__ = (
        # Deleting an item (retention) finds its keys without a scan.
        sa.Index("ix_submission_keys_work_item_id", "work_item_id"),
        # The safety sweep deletes the expired ones.
        sa.Index("ix_submission_keys_expires_at", "expires_at"),
    )
