"""Tables of the generic engine: work items, their dimensions, pending events.

Per-type detail tables (`mr_details`, ...) subclass `WorkItem` with joined-table
inheritance (DDR-7) and live in their type's package.
"""

from __future__ import annotations

import enum
import uuid
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class Base(DeclarativeBase):
    metadata = sa.MetaData(naming_convention=NAMING_CONVENTION)


class Phase(enum.StrEnum):
    """Coarse lifecycle of an item (DDR-2). Only `active` accepts events (DDR-37)."""

    ACTIVE = "active"  # being worked on, or waiting for an event or a deferral
    COMPLETED = "completed"  # finished successfully
    FAILED = "failed"  # gave up after max_attempts or a permanent error; retry reactivates
    CANCELLED = "cancelled"  # stopped by a person or by the outside world; retry reactivates


TERMINAL_PHASES = frozenset({Phase.COMPLETED, Phase.CANCELLED})
"""Phases outside the idempotency-key uniqueness (DDR-39): a new generation may start."""


class DimensionStatus(enum.StrEnum):
    """Status of a `needs_*` dimension row (DDR-48)."""

    TRUE = "true"  # the action this dimension triggers is needed
    FALSE = "false"  # handled; nothing to do until something sets it again


def enum_by_value(enum_class: type[enum.StrEnum], name: str) -> sa.Enum:
    # Stored as the member's value in a VARCHAR with a CHECK constraint: values
    # read well in SQL and adding a member needs no ALTER TYPE. Types store their
    # own enums the same way.
    return sa.Enum(
        enum_class,
        name=name,
        native_enum=False,
        create_constraint=True,
        length=32,
        values_callable=lambda members: [member.value for member in members],
        validate_strings=True,
    )


def _utc_now_column() -> Mapped[datetime]:
    return mapped_column(sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False)


class WorkItem(Base):
    """One unit of work of some `item_type`; polymorphic base of the detail tables."""

    __tablename__ = "work_items"

    id: Mapped[uuid.UUID] = mapped_column(
        sa.Uuid, primary_key=True, server_default=sa.text("gen_random_uuid()")
    )
    item_type: Mapped[str] = mapped_column(sa.String(64), nullable=False)
    phase: Mapped[Phase] = mapped_column(
        enum_by_value(Phase, "phase"), nullable=False, server_default=Phase.ACTIVE.value
    )
    # The persisted wake-up signal (DDR-49): true from the moment work is
    # enqueued until the processing loop finds nothing left to do.
    actionable: Mapped[bool] = mapped_column(sa.Boolean, nullable=False, server_default=sa.false())
    attempts: Mapped[int] = mapped_column(sa.Integer, nullable=False, server_default="0")
    error: Mapped[str | None] = mapped_column(sa.Text)
    leased_until: Mapped[datetime | None] = mapped_column(sa.DateTime(timezone=True))
    # Minted by every claim; outcome writes and heartbeats must present it.
    lease_token: Mapped[uuid.UUID | None] = mapped_column(sa.Uuid)
    next_attempt_at: Mapped[datetime | None] = mapped_column(sa.DateTime(timezone=True))
    caller_identity: Mapped[str] = mapped_column(sa.Text, nullable=False)
    # Where caller_identity comes from (a JWT issuer URL, `openshift`, `local`):
    # subjects are unique only per issuer, so ownership compares both. None
    # for items created before it was recorded: they match no caller.
    caller_issuer: Mapped[str | None] = mapped_column(sa.Text)
    # The GitLab project path the item acts on (a numeric id resolved), which
    # authorization scopes (`projects:`) are matched against, in SQL for lists.
    project_path: Mapped[str | None] = mapped_column(sa.Text)
    # The type's natural identity without the generation (mr: project and
    # source branch): the database holds at most one live item per key.
    live_key: Mapped[str | None] = mapped_column(sa.Text)
    idempotency_key: Mapped[str | None] = mapped_column(sa.Text)
    # What `authorization.limits` counts the owner as (`auth.limit_keys`): its
    # identity, or the claim value its rule names; None for items without an owner.
    limit_key: Mapped[str | None] = mapped_column(sa.Text)
    # Bytes of the text its caller made the service store for the item (for mr:
    # contents, title, description, commit message, labels, paths), set by its
    # type; what is left once retention dropped the contents. Summed per caller
    # (max_stored_bytes_per_caller).
    content_bytes: Mapped[int] = mapped_column(sa.BigInteger, nullable=False, server_default="0")
    # When the safety sweep dropped the contents (`retention.content_days`).
    contents_dropped_at: Mapped[datetime | None] = mapped_column(sa.DateTime(timezone=True))
    generation: Mapped[int] = mapped_column(sa.Integer, nullable=False, server_default="1")
    last_event_at: Mapped[datetime | None] = mapped_column(sa.DateTime(timezone=True))
    created_at: Mapped[datetime] = _utc_now_column()
    updated_at: Mapped[datetime] = _utc_now_column()

    statuses: Mapped[list[WorkItemStatus]] = relationship(
        back_populates="work_item",
        cascade="all, delete-orphan",
        passive_deletes=True,
        lazy="raise",
    )

    __mapper_args__: dict[str, Any] = {
        "polymorphic_on": "item_type",
        "polymorphic_load": "selectin",
    }

    __table_args__: tuple[Any, ...] = (
        # Claims and the due-time timer only ever look at actionable rows, so
        # their cost follows the amount of due work, not the table size; the
        # claim takes the longest-waiting first and stops after its limit.
        # (leased_until is deliberately not indexed: heartbeats then stay
        # cheap in-place updates.)
        sa.Index(
            "ix_work_items_actionable_since",
            "updated_at",
            postgresql_where=sa.text("actionable"),
        ),
        # DDR-39: at most one non-terminal item per idempotency key.
        sa.Index(
            "uq_work_items_idempotency_key_live",
            "idempotency_key",
            unique=True,
            postgresql_where=sa.text("phase NOT IN ('completed', 'cancelled')"),
        ),
        # One live (active or failed) item per natural identity, whatever its
        # generation: a retry of an old generation cannot make a second one.
        sa.Index(
            "uq_work_items_live_key",
            "live_key",
            unique=True,
            postgresql_where=sa.text("phase NOT IN ('completed', 'cancelled')"),
        ),
        # Per-caller limits count a caller's live items (migration 0016).
        sa.Index(
            "ix_work_items_limit_key_live",
            "caller_issuer",
            "limit_key",
            postgresql_where=sa.text("phase NOT IN ('completed', 'cancelled')"),
        ),
        # ... and sum the contents its items hold, live or finished (index-only).
        sa.Index(
            "ix_work_items_limit_key_content_bytes",
            "caller_issuer",
            "limit_key",
            "content_bytes",
            postgresql_where=sa.text("content_bytes > 0"),
        ),
        # Per-project limits count a project's live items.
        sa.Index(
            "ix_work_items_live_project_path",
            "project_path",
            postgresql_where=sa.text("phase NOT IN ('completed', 'cancelled')"),
        ),
        # The safety sweep finds a type's finished items not yet emptied, oldest
        # first, without walking those it already emptied (or other types').
        sa.Index(
            "ix_work_items_contents_held_updated_at",
            "item_type",
            "updated_at",
            postgresql_where=sa.text(
                "contents_dropped_at IS NULL AND phase IN ('completed', 'failed', 'cancelled')"
            ),
        ),
        # Scoped lists, and the attention reconciler's pages through one project in id
        # order (migration 0015).
        sa.Index("ix_work_items_project_path_id", "project_path", "id"),
        # Webhook resolution: the active items of the hook's project (migration 0010).
        sa.Index(
            "ix_work_items_active_project_path",
            "project_path",
            postgresql_where=sa.text("phase = 'active'"),
        ),
        # Lists, newest first, keyset-paged on (created_at, id): the page walks
        # the index and stops after its limit (migration 0009). The second one
        # serves the generic list by type and phase, and per-phase counts.
        sa.Index("ix_work_items_created_at_id", "created_at", "id"),
        sa.Index(
            "ix_work_items_item_type_phase_created_at_id",
            "item_type",
            "phase",
            "created_at",
            "id",
        ),
        # Lists by phase alone (the MR list, the generic list without a type)
        # page on this one: the last pages of phase=active stop at the oldest
        # active item instead of reading past every finished one (0011). Not
        # partial: the phase is a bound parameter, which a prepared
        # statement's generic plan cannot match against an index predicate.
        sa.Index("ix_work_items_phase_created_at_id", "phase", "created_at", "id"),
        # `prune` takes the oldest finished items first, batch by batch (0011).
        sa.Index(
            "ix_work_items_finished_updated_at",
            "updated_at",
            postgresql_where=sa.text("phase IN ('completed', 'failed', 'cancelled')"),
        ),
        sa.CheckConstraint("attempts >= 0", name="attempts_not_negative"),
        sa.CheckConstraint("generation >= 1", name="generation_positive"),
        # Room on each page for a claim's new row version: claims and
        # heartbeats change only unindexed columns, so with room they are HOT
        # updates that touch no index (migration 0013).
        {"postgresql_with": {"fillfactor": 50}},
    )


class WorkItemStatus(Base):
    """One `needs_*` dimension of an item, per variant (DDR-3/45/48)."""

    __tablename__ = "work_item_statuses"

    work_item_id: Mapped[uuid.UUID] = mapped_column(
        sa.ForeignKey("work_items.id", ondelete="CASCADE"), primary_key=True
    )
    dimension: Mapped[str] = mapped_column(sa.String(64), primary_key=True)
    variant: Mapped[str] = mapped_column(sa.String(255), primary_key=True, server_default="")
    status: Mapped[DimensionStatus] = mapped_column(
        enum_by_value(DimensionStatus, "dimension_status"), nullable=False
    )
    # While in the future the dimension reads as "false"; once due it reads as
    # its status again and the item is woken (DDR-48).
    pending_until: Mapped[datetime | None] = mapped_column(sa.DateTime(timezone=True))
    updated_at: Mapped[datetime] = _utc_now_column()

    work_item: Mapped[WorkItem] = relationship(back_populates="statuses", lazy="raise")

    __table_args__ = (
        sa.Index(
            "ix_work_item_statuses_pending_until",
            "pending_until",
            postgresql_where=sa.text("pending_until IS NOT NULL"),
        ),
    )


class ReceivedDelivery(Base):
    """Deliveries already accepted (webhook UUID / Idempotency-Key): redeliveries are no-ops.

    Kept after their events are processed, unlike `pending_events`; the safety
    sweep prunes rows older than the retention window.
    """

    __tablename__ = "received_deliveries"

    delivery_key: Mapped[str] = mapped_column(sa.Text, primary_key=True)
    source: Mapped[str] = mapped_column(sa.String(32), nullable=False)  # webhook | sqs
    event_type: Mapped[str] = mapped_column(sa.String(64), nullable=False)
    received_at: Mapped[datetime] = _utc_now_column()

    __table_args__ = (sa.Index("ix_received_deliveries_received_at", "received_at"),)


class PendingEvent(Base):
    """A raw event waiting to be interpreted by its item's processing loop (DDR-30/33)."""

    __tablename__ = "pending_events"

    id: Mapped[int] = mapped_column(sa.BigInteger, sa.Identity(), primary_key=True)
    work_item_id: Mapped[uuid.UUID] = mapped_column(
        sa.ForeignKey("work_items.id", ondelete="CASCADE"), nullable=False, index=True
    )
    event_type: Mapped[str] = mapped_column(sa.String(64), nullable=False)
    body: Mapped[dict[str, Any]] = mapped_column(JSONB, nullable=False)
    # Delivery identity (webhook UUID, SQS message id) + item: a redelivery is a no-op.
    dedupe_key: Mapped[str | None] = mapped_column(sa.Text, unique=True)
    received_at: Mapped[datetime] = _utc_now_column()


class CallerSubmissionWindow(Base):
    """Submissions per caller per minute, shared by every replica (`authorization.limits`)."""

    __tablename__ = "caller_submission_windows"

    caller_issuer: Mapped[str] = mapped_column(sa.Text, primary_key=True)
    # The caller's limit key (`auth.limit_keys`), as on its items.
    limit_key: Mapped[str] = mapped_column(sa.Text, primary_key=True)
    window_start: Mapped[datetime] = mapped_column(sa.DateTime(timezone=True), primary_key=True)
    submissions: Mapped[int] = mapped_column(sa.Integer, nullable=False)


class ProjectSubmissionWindow(Base):
    """Submissions per project per minute, all callers and replicas together."""

    __tablename__ = "project_submission_windows"

    project_path: Mapped[str] = mapped_column(sa.Text, primary_key=True)
    window_start: Mapped[datetime] = mapped_column(sa.DateTime(timezone=True), primary_key=True)
    submissions: Mapped[int] = mapped_column(sa.Integer, nullable=False)


class AuditRecord(Base):
    """An audit entry kept for the per-item history (`GET …/history`), pruned after
    `audit.retention_days`. No foreign key to `work_items`: entries about requests
    (denials, unknown ids) have no item, and history must never block a write."""

    __tablename__ = "audit_entries"

    id: Mapped[int] = mapped_column(sa.BigInteger, sa.Identity(), primary_key=True)
    # The entry's own id: a batch written twice (a retried flush) stores it once.
    entry_id: Mapped[uuid.UUID] = mapped_column(sa.Uuid, nullable=False, unique=True)
    occurred_at: Mapped[datetime] = mapped_column(sa.DateTime(timezone=True), nullable=False)
    work_item_id: Mapped[uuid.UUID | None] = mapped_column(sa.Uuid)
    item_type: Mapped[str | None] = mapped_column(sa.String(64))
    event_type: Mapped[str] = mapped_column(sa.String(64), nullable=False)
    actor: Mapped[str] = mapped_column(sa.Text, nullable=False)
    reason: Mapped[str | None] = mapped_column(sa.Text)
    before: Mapped[dict[str, Any] | None] = mapped_column(JSONB)
    after: Mapped[dict[str, Any] | None] = mapped_column(JSONB)
    details: Mapped[dict[str, Any]] = mapped_column(JSONB, nullable=False, server_default="{}")

    __table_args__ = (
        # One item's history, oldest first, keyset-paged.
        sa.Index(
            "ix_audit_entries_work_item_id_occurred_at_id", "work_item_id", "occurred_at", "id"
        ),
        # Retention pruning deletes the oldest rows first.
        sa.Index("ix_audit_entries_occurred_at", "occurred_at"),
    )
