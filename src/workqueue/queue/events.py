"""Applying interpreted events to items (DDR-33/37/38).

A type's handler looks at a raw event and returns an `EventResult`; this
module applies it the same way for every type: the phase change (active items
only, never backwards in event time), detail updates, the dimension changes
(which the loop writes with the rest of the step) and their audit entries.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Session

from workqueue.queue.audit.log import AuditEntry
from workqueue.queue.contract import (
    EventContext,
    EventResult,
    dimension_audit_entry,
    dimension_changes,
)
from workqueue.queue.dimensions import Dimensions, DimensionUpdate
from workqueue.queue.models import Phase, WorkItem
from workqueue.queue.registry import ItemTypeRegistration


class HandlerContractError(RuntimeError):
    """An event handler broke its read-only contract."""


@dataclass
class AppliedEvent:
    """The audit entries to write after commit and the dimension rows the event wrote."""

    audit: list[AuditEntry] = field(default_factory=list)
    dimension_updates: list[DimensionUpdate] = field(default_factory=list)
    outcome: str = "ignored"  # applied | stale | ignored


@dataclass(frozen=True)
class RawEvent:
    event_type: str
    body: Mapping[str, Any]
    received_at: datetime


def handle_event(
    session: Session,
    registration: ItemTypeRegistration,
    item: WorkItem,
    event: RawEvent,
    dimensions: Dimensions,
) -> AppliedEvent:
    """Interpret and apply one event."""

    def ignored(reason: str) -> AppliedEvent:
        entry = AuditEntry(
            event_type="event_ignored",
            work_item_id=item.id,
            item_type=item.item_type,
            reason=reason,
            details={"event_type": event.event_type},
        )
        return AppliedEvent([entry])

    if item.phase != Phase.ACTIVE:
        return ignored(f"item is {item.phase}")
    handler = registration.event_handlers.get(event.event_type)
    if handler is None:
        return ignored("no handler for this event type")
    # Earlier events of the same drain may have changed the item; write those
    # out so the read-only check below judges this handler alone.
    session.flush()
    result = handler(
        EventContext(session, item, dimensions, event.event_type, event.body, event.received_at)
    )
    if sa.inspect(item).modified:
        raise HandlerContractError(
            f"event handler for {item.item_type}/{event.event_type} modified the item; "
            "handlers must return an EventResult instead"
        )
    if result is None:
        return ignored("irrelevant to this item")
    return _apply(item, event, result, dimensions)


def _apply(
    item: WorkItem,
    event: RawEvent,
    result: EventResult,
    dimensions: Dimensions,
) -> AppliedEvent:
    entries: list[AuditEntry] = []
    stale = (
        result.event_ts is not None
        and item.last_event_at is not None
        and result.event_ts < item.last_event_at
    )
    if stale:
        entries.append(
            AuditEntry(
                event_type="event_stale",
                work_item_id=item.id,
                item_type=item.item_type,
                reason="older than the last applied event; phase and details left alone",
                details={"event_type": event.event_type, "event_ts": result.event_ts},
            )
        )
    else:
        if result.phase is not None and result.phase != item.phase:
            entries.append(
                AuditEntry(
                    event_type="phase_change",
                    work_item_id=item.id,
                    item_type=item.item_type,
                    before={"phase": str(item.phase)},
                    after={"phase": str(result.phase)},
                    reason=result.reason,
                    details={"event_type": event.event_type},
                )
            )
            item.phase = result.phase
        _apply_detail_updates(item, result.detail_updates)
        if result.event_ts is not None:
            item.last_event_at = result.event_ts
    # Dimensions apply even when the phase part is stale (DDR-38); the loop
    # writes them with the rest of the step.
    for update in result.dimensions:
        before = dimensions.state_of(update.dimension, update.variant)
        if dimension_changes(update, before):
            entries.append(dimension_audit_entry(item, update, before))
        dimensions = dimensions.with_updates([update])
    entries.append(
        AuditEntry(
            event_type="event_applied",
            work_item_id=item.id,
            item_type=item.item_type,
            reason=result.reason,
            details={"event_type": event.event_type, "stale": stale},
        )
    )
    return AppliedEvent(entries, list(result.dimensions), "stale" if stale else "applied")


def _apply_detail_updates(item: WorkItem, updates: Mapping[str, Any]) -> None:
    columns = sa.inspect(type(item)).column_attrs
    generic = set(sa.inspect(WorkItem).column_attrs.keys())
    for name, value in updates.items():
        if name not in columns or name in generic:
            raise HandlerContractError(f"{name!r} is not a detail column of {type(item).__name__}")
        setattr(item, name, value)
