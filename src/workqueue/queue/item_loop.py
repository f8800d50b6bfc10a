"""The per-item processing loop: drain events → decide → execute → commit → repeat.

One claim is processed by one thread. Each step is one transaction whose
outcome write is fenced on the claim's lease token, so a worker that lost its
lease (it stalled past expiry and another replica took over) changes nothing.
"""

from __future__ import annotations

import enum
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy.orm import Session, sessionmaker

from workqueue.db.errors import is_database_unavailable
from workqueue.queue import outbox, repository
from workqueue.queue.audit import AuditEntry, AuditLog
from workqueue.queue.config import ProcessingConfig
from workqueue.queue.context import ExecutionContext
from workqueue.queue.dimensions import Dimensions
from workqueue.queue.errors import LeaseLostError, PermanentError
from workqueue.queue.events import RawEvent, handle_event
from workqueue.queue.models import Phase, WorkItem
from workqueue.queue.observer import EngineObserver
from workqueue.queue.registry import Action, ItemTypeRegistration, TypeRegistry

logger = logging.getLogger(__name__)

MAX_ERROR_LENGTH = 4000

ItemCommitted = Callable[[uuid.UUID, str | None], None]
"""Told (item id, project path) after a commit that changed the item; must not raise."""


class DatabaseUnavailableError(Exception):
    """The database could not be reached during a step: nothing of it was committed."""


class ClaimOutcome(enum.StrEnum):
    """How processing of one claim ended."""

    IDLE = "idle"  # nothing left to do; actionable=false, lease released
    FAILED = "failed"  # an action failed; backoff or phase=failed recorded, lease released
    RELEASED = "released"  # stopped early (shutdown or deadline); still actionable
    LOST = "lost"  # the lease was taken over; nothing of this step was written
    GONE = "gone"  # the item no longer exists


@dataclass(frozen=True)
class ClaimResult:
    outcome: ClaimOutcome
    # Seconds until something this claim scheduled (a backoff, a deferral)
    # becomes due, so the manager can set its timer without a query.
    wake_in_seconds: float | None = None


class _StepResult(enum.Enum):
    CONTINUE = enum.auto()
    IDLE = enum.auto()
    FAILED = enum.auto()
    LOST = enum.auto()
    GONE = enum.auto()


@dataclass
class _StepState:
    """What one step learned, for failure reporting and audit."""

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


class ItemLoop:
    """Processes claims; shared by all worker threads of a manager (it is stateless)."""

    def __init__(
        self,
        *,
        sessions: sessionmaker[Session],
        registry: TypeRegistry,
        config: ProcessingConfig,
        audit: AuditLog,
        observer: EngineObserver | None = None,
        on_committed: ItemCommitted | None = None,
    ) -> None:
        self._sessions = sessions
        self._registry = registry
        self._config = config
        self._audit = audit
        self._observer = observer or EngineObserver()
        self._on_committed = on_committed

    def run(
        self,
        claim: repository.Claim,
        *,
        should_stop: Callable[[], bool],
        lease_lost: Callable[[], bool],
    ) -> ClaimResult:
        deadline = time.monotonic() + self._config.item_deadline_seconds
        reconnect_delay = 0.2
        wake_in: float | None = None
        while True:
            if lease_lost():
                return ClaimResult(ClaimOutcome.LOST)
            if should_stop() or time.monotonic() >= deadline:
                return ClaimResult(self._release(claim), wake_in)
            state = _StepState(item_type=claim.item_type)
            started = time.monotonic()
            try:
                result = self._step(claim, state)
            except DatabaseUnavailableError as error:
                # The database went away mid-step: nothing was committed, and it
                # is not the action's fault. Keep the claim and try again until
                # the database is back or the deadline passes.
                logger.warning(
                    "database unavailable while processing %s: %s", claim.item_id, error.__cause__
                )
                time.sleep(reconnect_delay)
                reconnect_delay = min(reconnect_delay * 2, 5.0)
                continue
            if state.wake_in_seconds is not None:
                # Relative to this step's start; re-based to the claim's end below.
                due = started + state.wake_in_seconds
                wake_in = min(wake_in, due) if wake_in is not None else due
            if result is not _StepResult.CONTINUE:
                remaining = None if wake_in is None else max(wake_in - time.monotonic(), 0.0)
                return ClaimResult(ClaimOutcome[result.name], remaining)

    # -- one step ----------------------------------------------------------

    def _step(self, claim: repository.Claim, state: _StepState) -> _StepResult:
        stored = False
        with self._sessions() as session:
            try:
                result = self._step_in_transaction(session, claim, state)
                # In the step's own transaction: history of a step that rolls
                # back never claims it happened.
                stored = self._audit.store_in(session, state.audit)
                session.commit()
            except LeaseLostError:
                session.rollback()
                logger.warning("lease on %s was lost; discarding this step", claim.item_id)
                self._observer.lease_lost(claim.item_type)
                return _StepResult.LOST
            except Exception as error:
                if is_database_unavailable(error):
                    raise DatabaseUnavailableError from error
                session.rollback()
                try:
                    return self._fail(session, claim, state, error)
                except Exception as failure:
                    if is_database_unavailable(failure):
                        raise DatabaseUnavailableError from failure
                    raise
        self._audit.write_all(state.audit, stored=stored)
        self._report(claim.item_type, state, "succeeded")
        if state.action is not None or state.events:
            self._committed(claim, state)
        return result

    def _committed(self, claim: repository.Claim, state: _StepState) -> None:
        """Tell the post-commit listener (attention queues) which item changed, and where."""
        if self._on_committed is None:
            return
        project = state.project_path
        if not state.loaded:
            # Failed before its snapshot was read (rare): look the project up.
            with self._sessions() as session:
                item = session.get(WorkItem, claim.item_id)
                if item is None:
                    return
                project = item.project_path
        try:
            self._on_committed(claim.item_id, project)
        except Exception:
            logger.exception("post-commit listener failed for %s", claim.item_id)

    def _report(self, item_type: str, state: _StepState, outcome: str) -> None:
        for event_type, event_outcome in state.events:
            self._observer.event_applied(item_type, event_type, event_outcome)
        if state.action is not None:
            self._observer.action_finished(
                item_type, state.action.name, outcome, state.action_seconds
            )

    def _step_in_transaction(
        self, session: Session, claim: repository.Claim, state: _StepState
    ) -> _StepResult:
        registration = self._registry.get(claim.item_type)
        snapshot = repository.load_for_step(session, registration.model, claim.item_id)
        if snapshot is None:
            return _StepResult.GONE
        item, now = snapshot.item, snapshot.now
        if item.lease_token != claim.lease_token:
            raise LeaseLostError(str(claim.item_id))
        seen_updated_at = item.updated_at
        state.loaded, state.project_path = True, item.project_path
        phase_before = item.phase
        dimensions = Dimensions(snapshot.dimensions, now)

        if snapshot.has_events:
            dimensions = self._drain_events(session, registration, item, dimensions, state)

        state.action = _decide(registration, item, dimensions)
        if state.action is not None:
            dimensions = self._execute(
                session,
                observer=self._observer,
                registration=registration,
                item=item,
                state=state,
                dimensions=dimensions,
                now=now,
            )
        # Whatever moved the phase (an event, an executor), the announcement
        # commits with it or not at all.
        if item.phase != phase_before:
            outbox.emit_phase_change(session, item)
        if state.action is not None and _decide(registration, item, dimensions) is not None:
            return self._continue(session, claim, action_succeeded=True)

        # Going idle is decided under the item's advisory lock (DDR-34):
        # enqueuers take the same lock, so their work is either visible to
        # `go_idle` or lands after our commit and wakes the item again.
        # An executor that failed the item itself keeps the error it wrote
        # (a success would clear it).
        succeeded = state.action is not None and not state.failed_by_executor
        if repository.go_idle(
            session, claim, seen_updated_at=seen_updated_at, action_succeeded=succeeded
        ):
            return _StepResult.IDLE
        return self._continue(session, claim, action_succeeded=succeeded)

    def _continue(
        self, session: Session, claim: repository.Claim, *, action_succeeded: bool
    ) -> _StepResult:
        if not repository.continue_step(
            session,
            claim,
            action_succeeded=action_succeeded,
            lease_seconds=self._config.lease_seconds,
        ):
            raise LeaseLostError(str(claim.item_id))
        return _StepResult.CONTINUE

    @staticmethod
    def _drain_events(
        session: Session,
        registration: ItemTypeRegistration,
        item: WorkItem,
        dimensions: Dimensions,
        state: _StepState,
    ) -> Dimensions:
        events = repository.pending_events(session, item.id)
        for event in events:
            applied = handle_event(
                session,
                registration,
                item,
                RawEvent(event.event_type, event.body, event.received_at),
                dimensions,
            )
            state.audit += applied.audit
            state.events.append((event.event_type, applied.outcome))
            for update in applied.dimension_updates:
                if update.pending_until is not None:
                    state.wake_within((update.pending_until - dimensions.now).total_seconds())
            dimensions = dimensions.with_updates(applied.dimension_updates)
        repository.delete_events(session, [event.id for event in events])
        session.flush()
        return dimensions

    @staticmethod
    def _execute(
        session: Session,
        *,
        observer: EngineObserver,
        registration: ItemTypeRegistration,
        item: WorkItem,
        state: _StepState,
        dimensions: Dimensions,
        now: datetime,
    ) -> Dimensions:
        """Run the chosen action; returns the dimensions as the action left them."""
        assert state.action is not None  # noqa: S101 - caller checked
        executor = registration.executor(state.action.name)
        context = ExecutionContext(session, item, state.action, dimensions, now)
        observer.action_started(item.item_type, state.action.name, item.id)
        started = state.action_started = time.monotonic()
        executor(context)
        session.flush()
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
                    "duration_seconds": round(time.monotonic() - started, 6),
                },
            )
        )
        for update in context.dimension_updates:
            if update.pending_until is not None:
                state.wake_within((update.pending_until - now).total_seconds())
        return dimensions.with_updates(context.dimension_updates)

    # -- endings -------------------------------------------------------------

    def _fail(
        self,
        session: Session,
        claim: repository.Claim,
        state: _StepState,
        error: Exception,
    ) -> _StepResult:
        permanent = isinstance(error, PermanentError)
        message = _describe(error)
        if not permanent:
            logger.warning(
                "action %s on %s failed: %s",
                state.action.name if state.action else "(events)",
                claim.item_id,
                message,
                exc_info=logger.isEnabledFor(logging.DEBUG),
            )
        # Whether this failure ends the item is read first, so the type's
        # failure hook runs before the item's row is written, in the same
        # transaction and in a step's lock order (its own rows, then the item's).
        final = repository.failure_is_final(
            session, claim, permanent=permanent, max_attempts=self._config.max_attempts
        )
        outcome = None
        if final is not None:
            if final:
                self._failure_hook(session, claim, message)
            outcome = repository.record_failure(
                session,
                claim,
                error=message,
                permanent=final,
                max_attempts=self._config.max_attempts,
                backoff_initial_seconds=self._config.backoff_initial_seconds,
                backoff_max_seconds=self._config.backoff_max_seconds,
            )
        if outcome is None:
            session.rollback()
            self._observer.lease_lost(claim.item_type)
            return _StepResult.LOST
        if outcome.phase == Phase.FAILED:
            outbox.emit_phase_reached(
                session,
                Phase.FAILED,
                work_item_id=claim.item_id,
                item_type=claim.item_type,
                project=outcome.project_path,
                error=message,
            )
        session.commit()
        if state.action_started is not None:
            state.action_seconds = time.monotonic() - state.action_started
        state.events.clear()  # rolled back with the step
        self._report(claim.item_type, state, "permanent_failure" if permanent else "failed")
        if outcome.retry_in_seconds is not None:
            state.wake_within(outcome.retry_in_seconds)
        entries = [
            AuditEntry(
                event_type="action_outcome",
                work_item_id=claim.item_id,
                item_type=state.item_type,
                after={"outcome": "permanent_failure" if permanent else "failed"},
                reason=message,
                details={
                    "action": state.action.name if state.action else None,
                    "attempts": outcome.attempts,
                    "retry_in_seconds": outcome.retry_in_seconds,
                },
            )
        ]
        if outcome.phase == Phase.FAILED:
            entries.append(
                AuditEntry(
                    event_type="phase_change",
                    work_item_id=claim.item_id,
                    item_type=state.item_type,
                    before={"phase": Phase.ACTIVE.value},
                    after={"phase": Phase.FAILED.value},
                    reason=message,
                )
            )
        self._audit.write_all(entries)
        self._committed(claim, state)
        return _StepResult.FAILED

    def _failure_hook(self, session: Session, claim: repository.Claim, message: str) -> None:
        """The type's cleanup for an item the engine fails (e.g. a slot it holds).

        If it raises, nothing is recorded (the transaction is not committed):
        the lease runs out and the failing step is tried again.
        """
        registration = self._registry.get(claim.item_type)
        if registration.failure_hook is None:
            return
        item = session.get(registration.model, claim.item_id, populate_existing=True)
        if item is None:
            return
        registration.failure_hook(session, item, message)
        session.flush()

    def _release(self, claim: repository.Claim) -> ClaimOutcome:
        try:
            with self._sessions() as session:
                released = repository.release_lease(session, claim)
                session.commit()
        except Exception as error:
            if not is_database_unavailable(error):
                raise
            logger.warning("could not release %s (it will expire): %s", claim.item_id, error)
            return ClaimOutcome.RELEASED
        return ClaimOutcome.RELEASED if released else ClaimOutcome.LOST


def _decide(
    registration: ItemTypeRegistration, item: WorkItem, dimensions: Dimensions
) -> Action | None:
    # Only active items have a next action; terminal ones just go idle.
    if item.phase != Phase.ACTIVE:
        return None
    return registration.decider(item, dimensions)


def _describe(error: Exception) -> str:
    text = str(error) or type(error).__name__
    if not isinstance(error, PermanentError):
        text = f"{type(error).__name__}: {text}"
    return text[:MAX_ERROR_LENGTH]
