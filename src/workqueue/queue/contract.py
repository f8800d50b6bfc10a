"""Everything an item type codes against, in one place.

A type is a model (a `WorkItem` subclass), a pure decider, executors that
perform actions, and optionally event handlers, resolvers, creators and
hooks; it registers them on a `TypeRegistry` (`workqueue.queue.registry`).
This module defines what those functions receive and return:

* `Action` — what the decider asks for next;
* `ExecutionContext` — what an executor gets: the item, its dimensions, the
  session, and helpers to set dimensions, the phase, audit entries;
* `EventContext` and `EventResult` — what an event handler reads and returns;
* the signatures (`Decider`, `Executor`, `EventHandler`, `Resolver`,
  `ManyResolver`, `Creator`, the hooks) and `PermanentError`;
* re-exported for convenience: `Phase`, `DimensionStatus`, `Dimensions`,
  `DimensionUpdate`, `WorkItem`.

It imports nothing else of the engine but its data types, so the engine's
modules can all depend on it without cycles.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy.orm import Session

from workqueue.queue.audit.log import AuditEntry
from workqueue.queue.dimensions import Dimensions, DimensionUpdate
from workqueue.queue.errors import PermanentError
from workqueue.queue.models import DimensionStatus, Phase, WorkItem

__all__ = [
    "Action",
    "CancelHook",
    "Creator",
    "Decider",
    "DimensionStatus",
    "DimensionUpdate",
    "Dimensions",
    "EventContext",
    "EventHandler",
    "EventResult",
    "ExecutionContext",
    "Executor",
    "FailureHook",
    "ManyResolver",
    "PermanentError",
    "Phase",
    "ProjectPathResolver",
    "ProjectSubmissionCheck",
    "Resolver",
    "RetryHook",
    "WorkItem",
    "dimension_audit_entry",
    "dimension_changes",
]


@dataclass(frozen=True, slots=True)
class Action:
    """What the decider wants done next: an executor name, and a variant for per-variant work."""

    name: str
    variant: str = ""


@dataclass
class ExecutionContext:
    """One action being executed for one claimed item.

    Executors change state through `item`, `session` and the helpers here,
    flush if they need database-generated values, and never commit or roll
    back: the processing loop owns the transaction (and its lease fencing).

    Dimension changes are written by the loop at the end of the step, together
    with the rest of its batch. The session is handed out on first use: an
    executor that never touches it (it only sets dimensions, the phase or
    audit entries) needs no savepoint of its own inside a batched step.
    """

    _session: Session
    item: WorkItem
    action: Action
    dimensions: Dimensions
    now: datetime
    audit_entries: list[AuditEntry] = field(default_factory=list)
    dimension_updates: list[DimensionUpdate] = field(default_factory=list)
    # Set by `fail`: the step's error must survive the end of the step.
    failed: bool = False
    # Called once, before the session is first handed out (the loop's savepoint).
    on_first_session_use: Callable[[], None] | None = None
    session_used: bool = False

    @property
    def session(self) -> Session:
        if not self.session_used:
            self.session_used = True
            if self.on_first_session_use is not None:
                self.on_first_session_use()
        return self._session

    def set_dimension(
        self,
        dimension: str,
        status: DimensionStatus,
        *,
        variant: str = "",
        pending_until: datetime | None = None,
    ) -> None:
        """Change a dimension row (written when the step ends). Executors change
        dimensions only through here: the loop decides the next action from the
        dimensions it read plus these."""
        update = DimensionUpdate(dimension, status, variant, pending_until)
        before = self.dimensions.with_updates(self.dimension_updates).state_of(dimension, variant)
        if dimension_changes(update, before):
            self.audit_entries.append(dimension_audit_entry(self.item, update, before))
        self.dimension_updates.append(update)

    def defer(self, dimension: str, delay: timedelta, *, variant: str = "") -> None:
        """Re-evaluate `dimension` after `delay`; not a failure and costs no attempt."""
        self.set_dimension(
            dimension, DimensionStatus.TRUE, variant=variant, pending_until=self.now + delay
        )

    def set_phase(self, phase: Phase, reason: str) -> None:
        """Move the item to another phase (DDR-15: executors apply state directly)."""
        if self.item.phase == phase:
            return
        self.audit_entries.append(
            AuditEntry(
                event_type="phase_change",
                work_item_id=self.item.id,
                item_type=self.item.item_type,
                before={"phase": str(self.item.phase)},
                after={"phase": str(phase)},
                reason=reason,
                details={"action": self.action.name},
            )
        )
        self.item.phase = phase

    def fail(self, message: str) -> None:
        """End the item `failed` with `message` as its error, KEEPING this step's writes.

        Unlike raising `PermanentError` (which rolls the step back first), this
        commits what the executor wrote alongside the failure: a type that holds
        a shared resource (a build slot) releases it in the same transaction.
        """
        self.set_phase(Phase.FAILED, message)
        self.item.error = message
        self.failed = True

    def audit(self, event_type: str, reason: str | None = None, **details: Any) -> None:
        self.audit_entries.append(
            AuditEntry(
                event_type=event_type,
                work_item_id=self.item.id,
                item_type=self.item.item_type,
                reason=reason,
                details=details,
            )
        )


@dataclass(frozen=True)
class EventContext:
    """One raw event offered to a type's handler. Handlers read; they never write."""

    session: Session
    item: WorkItem
    dimensions: Dimensions
    event_type: str
    body: Mapping[str, Any]
    received_at: datetime


def dimension_changes(update: DimensionUpdate, before: Mapping[str, Any] | None) -> bool:
    """Whether `update` changes the row `before` (`Dimensions.state_of`). Setting a
    row to what it holds is no change and leaves no `dimension_change` entry: an
    item stepped for five pipeline events would otherwise show five."""
    return before != {"status": str(update.status), "pending_until": update.pending_until}


def dimension_audit_entry(
    item: WorkItem, update: DimensionUpdate, before: Mapping[str, Any] | None
) -> AuditEntry:
    return AuditEntry(
        event_type="dimension_change",
        work_item_id=item.id,
        item_type=item.item_type,
        before=before,
        after={
            "dimension": update.dimension,
            "variant": update.variant,
            "status": str(update.status),
            "pending_until": update.pending_until,
        },
    )


@dataclass(frozen=True)
class EventResult:
    """What an event means for one item."""

    phase: Phase | None = None  # the phase the event moves the item to, if any
    event_ts: datetime | None = None  # when the event happened at its source
    dimensions: tuple[DimensionUpdate, ...] = ()
    # Detail columns to set (e.g. a new head pipeline id); applied with the phase.
    detail_updates: Mapping[str, Any] = field(default_factory=dict)
    reason: str | None = None


Decider = Callable[[Any, Dimensions], Action | None]
"""Pure function of the item (its columns and details) and its dimensions (DDR-4)."""

Executor = Callable[[ExecutionContext], None]
"""Performs one action; changes state through the session and context; never commits."""

EventHandler = Callable[[EventContext], EventResult | None]
"""Interprets one raw event for one item; read-only; its result is applied generically."""

CancelHook = Callable[[Session, Any, Mapping[str, Any]], None]
"""Type-specific cleanup when a person cancels an item (e.g. close its MR on request)."""

RetryHook = Callable[[Session, Any], None]
"""Type-specific preparation when a person retries an item (e.g. ask for its MR again)."""

FailureHook = Callable[[Session, Any, str], None]
"""Type-specific cleanup when the ENGINE fails an item (a `PermanentError`, or an error
repeated until `max_attempts`), with the error: it runs in the transaction that moves
the item to `failed` (e.g. give back a shared slot the item held). Not called for
`ExecutionContext.fail`, where the type's own executor already ends the item."""

ContentDropper = Callable[[Session, Sequence[uuid.UUID]], None]
"""Drops the stored contents of these finished items of the type (`retention.content_days`),
keeping what describes them (each file's size and sha256), and sets their `content_bytes`
to the bytes they still hold. The engine has already set their `contents_dropped_at`,
under row locks, in this transaction."""

ProjectPathResolver = Callable[[str], str]
"""Turns a submitted project reference (a path or a numeric id) into the project's path,
which authorization scopes match; a type whose items name projects by id provides one."""

ProjectSubmissionCheck = Callable[[str, Any], list[dict[str, Any]]]
"""Checks a parsed submission body against its project's own settings on GitLab (e.g. which
file is its CI configuration): given the project as submitted and the body, the entries of
a 422 `detail` list, empty when it passes. Called once the caller is authorized on the
project, so an answer tells nothing about projects out of its scope; GitLab errors
propagate, as from the project path resolver."""

Resolver = Callable[[Session, Mapping[str, Any]], list[uuid.UUID]]
"""Finds the active items an incoming event of some type concerns (DDR-32)."""

ManyResolver = Callable[[Session, Sequence[Mapping[str, Any]]], list[list[uuid.UUID]]]
"""A `Resolver` for many events of one type at once: for each body, in the order given,
exactly what the `Resolver` answers for it. Optional; with one, the intake resolves a
batch of deliveries with one query per type instead of one per delivery."""

Creator = Callable[[Session, Mapping[str, Any]], list[uuid.UUID]]
"""Creates the items an incoming event brings into being (a pushed head to validate)
and returns their ids; flushes, never commits. It must be idempotent per event
(a redelivery whose delivery record was pruned runs it again) and, like a
resolver, must treat a malformed payload as "nothing to create"."""
