"""One item's part of a processing step: drain its events, decide, execute.

A step runs a batch of claimed items of one type in one transaction (see
`item_loop`). Each item's part is a `StepUnit`; what it changes in the
database goes through the session, and what the engine writes for it (its
dimension rows, the events it consumed, its outcome) is collected here and
written for the whole batch at the end.

Isolation inside a batch: an item whose executor or handlers touch the
session gets a savepoint first, so its failure rolls back only its own
writes. An executor that never touches the session (it only sets
dimensions, the phase or audit entries) has written nothing, so it needs no
savepoint: a failure only discards its in-memory changes.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Session, SessionTransaction

from workqueue.queue.audit.log import AuditEntry
from workqueue.queue.contract import Action, ExecutionContext
from workqueue.queue.dimensions import Dimensions, DimensionUpdate
from workqueue.queue.events import RawEvent, handle_event
from workqueue.queue.models import Phase, WorkItem
from workqueue.queue.observer import EngineObserver
from workqueue.queue.outbox import emit as outbox
from workqueue.queue.processing import step_repository
from workqueue.queue.processing.lease_repository import Claim
from workqueue.queue.registry import ItemTypeRegistration


@dataclass
class StepState:
    """What one item's step learned, for failure reporting and audit."""

    item_type: str = ""
    action: Action | None = None
    audit: list[AuditEntry] = field(default_factory=list)
    wake_in_seconds: float | None = None
    action_started: float | None = None  # monotonic
    action_seconds: float = 0.0
    events: list[tuple[str, str]] = field(default_factory=list)  # (event type, outcome)
    loaded: bool = False  # the snapshot was read: project_path is the item's
    project_path: str | None = None
    failed_by_executor: bool = False  # `ExecutionContext.fail`: keep the item's error

    def wake_within(self, seconds: float) -> None:
        if self.wake_in_seconds is None or seconds < self.wake_in_seconds:
            self.wake_in_seconds = seconds


@dataclass
class StepUnit:
    """One claimed item inside a batched step."""

    claim: Claim
    registration: ItemTypeRegistration
    snapshot: step_repository.StepSnapshot
    state: StepState
    isolated: bool  # other items share the transaction: protect them from this one
    dimension_writes: list[DimensionUpdate] = field(default_factory=list)
    consumed_events: list[int] = field(default_factory=list)
    savepoint: SessionTransaction | None = None
    error: Exception | None = None
    more_work: bool = False  # the decider still has an action after this step's
    # Changes outside the savepoint that the batch cannot undo on its own.
    entangled: bool = False
    # `updated_at` as read, before this step's own writes move it: going idle
    # requires it unchanged (nobody enqueued work meanwhile).
    seen_updated_at: datetime = field(init=False)

    def __post_init__(self) -> None:
        self.seen_updated_at = self.snapshot.item.updated_at

    @property
    def item(self) -> WorkItem:
        return self.snapshot.item

    @property
    def item_id(self) -> uuid.UUID:
        return self.claim.item_id

    def protect(self, session: Session) -> None:
        """Take this item's savepoint before its first write (once; only inside a batch).

        Changes already made to the item in memory must end up inside the
        savepoint, but opening one flushes the session first: they are set
        aside, the savepoint opened, and then applied again. A change that
        cannot be carried over (not a plain column) leaves the unit
        `entangled`: if it then fails, the batch is stepped item by item.
        """
        if not self.isolated or self.savepoint is not None:
            return
        pending = _pending_column_changes(self.item)
        if pending is None:
            self.entangled = True
        elif pending:
            session.expire(self.item, list(pending))
        self.savepoint = session.begin_nested()
        for key, value in (pending or {}).items():
            setattr(self.item, key, value)

    def discard(self, session: Session) -> None:
        """Undo this item's part after a failure: its writes and its in-memory changes."""
        # A failed flush leaves the savepoint inactive but still current: it
        # must be rolled back all the same before the session can go on.
        if self.savepoint is not None and session.get_nested_transaction() is self.savepoint:
            self.savepoint.rollback()
        self.savepoint = None
        session.expire(self.item)
        self.dimension_writes.clear()
        self.consumed_events.clear()
        self.state.events.clear()
        self.state.audit.clear()

    def settle(self) -> None:
        """Keep this item's part: release its savepoint into the batch's transaction."""
        if self.savepoint is not None and self.savepoint.is_active:
            self.savepoint.commit()
        self.savepoint = None


def run_unit(session: Session, unit: StepUnit, observer: EngineObserver) -> None:
    """Drain, decide and execute for one item; an exception is left in `unit.error`."""
    item, state = unit.item, unit.state
    dimensions = Dimensions(unit.snapshot.dimensions, unit.snapshot.now)
    phase_before = item.phase
    try:
        if unit.snapshot.has_events:
            # Handlers may read through the session and the drain writes the
            # item: always inside this item's savepoint.
            unit.protect(session)
            dimensions = _drain_events(session, unit, dimensions)
        state.action = decide(unit.registration, item, dimensions)
        if state.action is not None:
            dimensions = _execute(session, unit, dimensions, observer)
        # Whatever moved the phase (an event, an executor), the announcement
        # commits with it or not at all.
        if item.phase != phase_before:
            unit.protect(session)
            outbox.emit_phase_change(session, item)
        if unit.savepoint is not None:
            session.flush()
        unit.more_work = (
            state.action is not None and decide(unit.registration, item, dimensions) is not None
        )
    except Exception as error:  # the loop records it as this item's failure
        unit.error = error
        return
    unit.settle()


def _drain_events(session: Session, unit: StepUnit, dimensions: Dimensions) -> Dimensions:
    state = unit.state
    events = unit.snapshot.events
    for event in events:
        applied = handle_event(
            session,
            unit.registration,
            unit.item,
            RawEvent(event.event_type, event.body, event.received_at),
            dimensions,
        )
        state.audit += applied.audit
        state.events.append((event.event_type, applied.outcome))
        for update in applied.dimension_updates:
            if update.pending_until is not None:
                state.wake_within((update.pending_until - dimensions.now).total_seconds())
        unit.dimension_writes += applied.dimension_updates
        dimensions = dimensions.with_updates(applied.dimension_updates)
    unit.consumed_events += [event.id for event in events]
    return dimensions


def _execute(
    session: Session, unit: StepUnit, dimensions: Dimensions, observer: EngineObserver
) -> Dimensions:
    """Run the chosen action; returns the dimensions as the action left them."""
    state, item, now = unit.state, unit.item, unit.snapshot.now
    assert state.action is not None  # noqa: S101 - caller checked
    executor = unit.registration.executor(state.action.name)
    context = ExecutionContext(
        session,
        item,
        state.action,
        dimensions,
        now,
        on_first_session_use=lambda: unit.protect(session),
    )
    observer.action_started(item.item_type, state.action.name, item.id)
    started = state.action_started = time.monotonic()
    executor(context)
    state.failed_by_executor = context.failed
    state.action_seconds = time.monotonic() - started
    state.audit += context.audit_entries
    state.audit.append(
        AuditEntry(
            event_type="action_outcome",
            work_item_id=item.id,
            item_type=item.item_type,
            after={"outcome": "succeeded"},
            details={
                "action": state.action.name,
                "variant": state.action.variant,
                "duration_seconds": round(state.action_seconds, 6),
            },
        )
    )
    for update in context.dimension_updates:
        if update.pending_until is not None:
            state.wake_within((update.pending_until - now).total_seconds())
    unit.dimension_writes += context.dimension_updates
    return dimensions.with_updates(context.dimension_updates)


def _pending_column_changes(item: WorkItem) -> dict[str, Any] | None:
    """The item's unflushed column changes (name → new value); None if others are pending."""
    state = sa.inspect(item)
    columns = state.mapper.column_attrs.keys()
    pending: dict[str, Any] = {}
    for attribute in state.attrs:
        if not attribute.history.has_changes():
            continue
        if attribute.key not in columns:
            return None
        pending[attribute.key] = attribute.value
    return pending


def decide(
    registration: ItemTypeRegistration, item: WorkItem, dimensions: Dimensions
) -> Action | None:
    # Only active items have a next action; terminal ones just go idle.
    if item.phase != Phase.ACTIVE:
        return None
    return registration.decider(item, dimensions)


ShouldStop = Callable[[], bool]
LeaseLost = Callable[[uuid.UUID], bool]
Now = Callable[[], datetime]
