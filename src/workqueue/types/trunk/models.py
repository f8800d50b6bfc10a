"""Tables of the `trunk` type: one row per configured queue, one detail row per head.

`trunk_queues` is runtime coordination only (DDR-7 style detail tables stay per
item): the slots in flight, the last green head and the newest head ingested.
Knobs such as `max_concurrent` live in the config, never in this row.
"""

from __future__ import annotations

import enum
import uuid
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.orm import Mapped, mapped_column

from workqueue.queue import Base, WorkItem, enum_by_value

TRUNK_ITEM_TYPE = "trunk"


class TrunkState(enum.StrEnum):
    """Where one head stands (the seed's Request states)."""

    ACCEPTED = "accepted"  # ingested, waiting to be admitted (phase active)
    PROCESSING = "processing"  # admitted: strategy recorded, slot held (phase active)
    SUPERSEDED = "superseded"  # skipped for a newer head (phase completed)
    SUCCEEDED = "succeeded"  # its pipeline passed (phase completed)
    FAILED = "failed"  # its pipeline failed, or no result by the deadline (phase failed)
    CANCELLED = "cancelled"  # its pipeline was canceled, or a person cancelled it


TERMINAL_STATES = frozenset(
    {TrunkState.SUPERSEDED, TrunkState.SUCCEEDED, TrunkState.FAILED, TrunkState.CANCELLED}
)


class BuildStrategy(enum.StrEnum):
    INCREMENTAL = "incremental"  # only the delta since base_sha (the last green)
    FULL = "full"  # everything: cold start, rewritten history, unknown ancestry


class TrunkDimension(enum.StrEnum):
    NEEDS_PROCESS = "needs_process"  # decide: supersede, wait for a slot, admit, build
    NEEDS_RECORD = "needs_record"  # look at the pipeline: finished? (hooks and polling)


class CompletionReason(enum.StrEnum):
    SUPERSEDED = "superseded"
    GREEN = "green"


class TrunkQueue(Base):
    """One configured (project, branch): the slots in flight and the two head pointers."""

    __tablename__ = "trunk_queues"

    name: Mapped[str] = mapped_column(sa.Text, primary_key=True)  # "group/app:main"
    project: Mapped[str] = mapped_column(sa.Text, nullable=False)
    branch: Mapped[str] = mapped_column(sa.Text, nullable=False)
    # Items in state processing: +1 on admission, -1 on their terminal transition.
    in_flight: Mapped[int] = mapped_column(sa.Integer, nullable=False, server_default="0")
    last_green_sha: Mapped[str | None] = mapped_column(sa.Text)
    last_green_sequence: Mapped[int | None] = mapped_column(sa.BigInteger)
    last_green_item_id: Mapped[uuid.UUID | None] = mapped_column(sa.Uuid)
    # The newest head ingested; set only after its item exists.
    latest_item_id: Mapped[uuid.UUID | None] = mapped_column(sa.Uuid)
    latest_sequence: Mapped[int] = mapped_column(sa.BigInteger, nullable=False, server_default="0")
    # Speculative rule 4: after a rewrite, admit one at a time until a full build is green.
    serial_until_green: Mapped[bool] = mapped_column(
        sa.Boolean, nullable=False, server_default=sa.false()
    )
    # Compare-and-set version of the admission state (in_flight, last green, serial).
    version: Mapped[int] = mapped_column(sa.BigInteger, nullable=False, server_default="0")
    updated_at: Mapped[datetime] = mapped_column(
        sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
    )

    __table_args__ = (
        sa.CheckConstraint("in_flight >= 0", name="in_flight_not_negative"),
        sa.UniqueConstraint("project", "branch"),
    )


class TrunkWorkItem(WorkItem):
    """One landed head of one queue."""

    __tablename__ = "trunk_details"
    __mapper_args__ = {"polymorphic_identity": TRUNK_ITEM_TYPE}

    id: Mapped[uuid.UUID] = mapped_column(
        sa.ForeignKey("work_items.id", ondelete="CASCADE"), primary_key=True
    )
    queue: Mapped[str] = mapped_column(
        sa.ForeignKey("trunk_queues.name", ondelete="CASCADE"), nullable=False
    )
    # Ingest order within the queue (dense: 1, 2, ...): "newer" means a higher sequence.
    sequence: Mapped[int] = mapped_column(sa.BigInteger, nullable=False)
    sha: Mapped[str] = mapped_column(sa.String(40), nullable=False)
    state: Mapped[TrunkState] = mapped_column(
        enum_by_value(TrunkState, "trunk_state"),
        nullable=False,
        server_default=TrunkState.ACCEPTED.value,
    )
    build_strategy: Mapped[BuildStrategy | None] = mapped_column(
        enum_by_value(BuildStrategy, "build_strategy")
    )
    base_sha: Mapped[str | None] = mapped_column(sa.String(40))
    admitted_at: Mapped[datetime | None] = mapped_column(sa.DateTime(timezone=True))
    pipeline_id: Mapped[int | None] = mapped_column(sa.BigInteger)
    pipeline_url: Mapped[str | None] = mapped_column(sa.Text)
    pipeline_status: Mapped[str | None] = mapped_column(sa.Text)
    # A retry validates the head again: pipelines up to this id belong to its earlier
    # validations and are never adopted as the new one's.
    retired_pipeline_id: Mapped[int | None] = mapped_column(sa.BigInteger)
    completion_reason: Mapped[str | None] = mapped_column(sa.Text)

    __table_args__ = (
        # Ingest dedupes per (queue, sha); coalescing ranks by sequence.
        sa.UniqueConstraint("queue", "sha"),
        sa.UniqueConstraint("queue", "sequence"),
        sa.Index(
            "ix_trunk_details_pipeline_id",
            "pipeline_id",
            postgresql_where=sa.text("pipeline_id IS NOT NULL"),
        ),
        sa.Index("ix_trunk_details_queue_state", "queue", "state"),
    )
