"""The per-item processing loop: drain events → decide → execute → commit → repeat.

One claim is processed by one thread. Each step is one transaction whose
outcome write is fenced on the claim's lease token, so a worker that lost its
lease (it stalled past expiry and another replica took over) changes nothing.
"""

from __future__ import annotations

import enum
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.orm import Session, sessionmaker

from workqueue.queue import repository
from workqueue.queue.audit import AuditEntry, AuditLog
from workqueue.queue.config import ProcessingConfig
from workqueue.queue.context import ExecutionContext
from workqueue.queue.dimensions import Dimensions
from workqueue.queue.errors import LeaseLostError, PermanentError
from workqueue.queue.events import RawEvent, handle_event
from workqueue.queue.models import Phase, WorkItem
from workqueue.queue.registry import Action, ItemTypeRegistration, TypeRegistry

logger = logging.getLogger(__name__)

MAX_ERROR_LENGTH = 4000
# Errors that mean "the database is unreachable right now", not "the action failed".
CONNECTION_ERRORS = (sa.exc.OperationalError, sa.exc.InterfaceError)


class ClaimOutcome(enum.StrEnum):
    """How processing of one claim ended."""

    IDLE = "idle"  # nothing left to do; actionable=false, lease released
    FAILED = "failed"  # an action failed; backoff or phase=failed recorded, lease released
    RELEASED = "released"  # stopped early (shutdown or deadline); still actionable
    LOST = "lost"  # the lease was taken over; nothing of this step was written
    GONE = "gone"  # the item no longer exists


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


class ItemLoop:
    """Processes claims; shared by all worker threads of a manager (it is stateless)."""

    def __init__(
        self,
        *,
        sessions: sessionmaker[Session],
        registry: TypeRegistry,
        config: ProcessingConfig,
        audit: AuditLog,
    ) -> None:
        self._sessions = sessions
        self._registry = registry
        self._config = config
        self._audit = audit

    def run(
        self,
        claim: repository.Claim,
        *,
        should_stop: Callable[[], bool],
        lease_lost: Callable[[], bool],
    ) -> ClaimOutcome:
        deadline = time.monotonic() + self._config.item_deadline_seconds
        reconnect_delay = 0.2
        while True:
            if lease_lost():
                return ClaimOutcome.LOST
            if should_stop() or time.monotonic() >= deadline:
                return self._release(claim)
            try:
                result = self._step(claim)
            except CONNECTION_ERRORS as error:
                # The database went away mid-step: nothing was committed. Keep
                # the claim and try again until it is back or the deadline passes.
                logger.warning("database unavailable while processing %s: %s", claim.item_id, error)
                time.sleep(reconnect_delay)
                reconnect_delay = min(reconnect_delay * 2, 5.0)
                continue
            if result is not _StepResult.CONTINUE:
                return ClaimOutcome[result.name]

    # -- one step ----------------------------------------------------------

    def _step(self, claim: repository.Claim) -> _StepResult:
        state = _StepState(item_type=claim.item_type)
        with self._sessions() as session:
            try:
                result = self._step_in_transaction(session, claim, state)
                session.commit()
            except LeaseLostError:
                session.rollback()
                logger.warning("lease on %s was lost; discarding this step", claim.item_id)
                return _StepResult.LOST
            except CONNECTION_ERRORS:
                raise
            except Exception as error:
                session.rollback()
                return self._fail(session, claim, state, error)
        self._audit.write_all(state.audit)
        return result

    def _step_in_transaction(
        self, session: Session, claim: repository.Claim, state: _StepState
    ) -> _StepResult:
        now = repository.database_now(session)
        item = repository.load_item(session, claim.item_id)
        if item is None:
            return _StepResult.GONE
        if item.lease_token != claim.lease_token:
            raise LeaseLostError(str(claim.item_id))
        registration = self._registry.get(item.item_type)
        dimensions = Dimensions(repository.load_dimensions(session, item.id), now)

        events = repository.pending_events(session, item.id)
        for event in events:
            state.audit += handle_event(
                session,
                registration,
                item,
                RawEvent(event.event_type, event.body, event.received_at),
                dimensions,
            )
            session.flush()
            dimensions = Dimensions(repository.load_dimensions(session, item.id), now)
        repository.delete_events(session, [event.id for event in events])

        state.action = _decide(registration, item, dimensions)
        if state.action is not None:
            self._execute(
                session,
                registration=registration,
                item=item,
                state=state,
                dimensions=dimensions,
                now=now,
            )

        # Decide whether to go idle under the item's advisory lock (DDR-34):
        # whoever enqueues work takes the same lock, so their work is either
        # visible now or arrives after we commit and wakes the item again.
        repository.lock_item(session, item.id)
        if state.action is None and not events:
            seen_updated_at = item.updated_at
            check = repository.idle_check(session, item.id)
            idle = check is not None and check == (seen_updated_at, False)
        else:
            session.refresh(item)
            dimensions = Dimensions(repository.load_dimensions(session, item.id), now)
            check = repository.idle_check(session, item.id)
            idle = _decide(registration, item, dimensions) is None and not (check and check[1])
        if not repository.finish_step(
            session,
            claim,
            idle=idle,
            action_succeeded=state.action is not None,
            lease_seconds=self._config.lease_seconds,
        ):
            raise LeaseLostError(str(claim.item_id))
        return _StepResult.IDLE if idle else _StepResult.CONTINUE

    @staticmethod
    def _execute(
        session: Session,
        *,
        registration: ItemTypeRegistration,
        item: WorkItem,
        state: _StepState,
        dimensions: Dimensions,
        now: datetime,
    ) -> None:
        assert state.action is not None  # noqa: S101 - caller checked
        executor = registration.executor(state.action.name)
        context = ExecutionContext(session, item, state.action, dimensions, now)
        started = time.monotonic()
        executor(context)
        session.flush()
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
        outcome = repository.record_failure(
            session,
            claim,
            error=message,
            permanent=permanent,
            max_attempts=self._config.max_attempts,
            backoff_initial_seconds=self._config.backoff_initial_seconds,
            backoff_max_seconds=self._config.backoff_max_seconds,
        )
        if outcome is None:
            session.rollback()
            return _StepResult.LOST
        session.commit()
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
                    "next_attempt_at": outcome.next_attempt_at,
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
        return _StepResult.FAILED

    def _release(self, claim: repository.Claim) -> ClaimOutcome:
        try:
            with self._sessions() as session:
                released = repository.release_lease(session, claim)
                session.commit()
        except CONNECTION_ERRORS as error:
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
