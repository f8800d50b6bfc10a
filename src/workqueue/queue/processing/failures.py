"""Recording a failed step: count the attempt, back off or fail the item, tell the type.

A lone item's failed step is rolled back and its failure recorded in a fresh
transaction (`fail_alone`); an item failing inside a batch has its own part
undone and its failure recorded in a savepoint, so the others still commit
(`fail_in_batch`). Failures of a step that was discarded as a whole are
recorded again, each on its own (`fail_again`, `owed_failures`): their actions
did fail, and running them again at once would ignore a `Retry-After`.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Collection, Sequence

from sqlalchemy.orm import Session

from workqueue.db.errors import is_database_unavailable, is_lock_conflict
from workqueue.queue.audit.log import AuditEntry, AuditLog
from workqueue.queue.errors import PermanentError, is_outage, retry_after_seconds
from workqueue.queue.models import Phase
from workqueue.queue.observer import EngineObserver
from workqueue.queue.outbox import emit as outbox
from workqueue.queue.processing import lease_repository
from workqueue.queue.processing.claims_run import (
    DatabaseUnavailableError,
    Ending,
    OwedFailure,
    Step,
)
from workqueue.queue.processing.config import ProcessingConfig
from workqueue.queue.processing.item_step import StepState, StepUnit
from workqueue.queue.registry import TypeRegistry

logger = logging.getLogger(__name__)

MAX_ERROR_LENGTH = 4000
# `max_attempts` for an outage's failures: attempts still count (the backoff
# grows with them), but never up to a number that fails the item.
_NEVER_FINAL = 2**31 - 1

StepReport = Callable[[str, StepState, str], None]
"""Told (item type, state, outcome) to count a step's events and action."""

StepCommitted = Callable[[lease_repository.Claim, StepState], None]
"""Told of a claim whose item a commit changed (the post-commit listener)."""


class FailureRecorder:
    """Records the failures of an `ItemLoop`'s steps; stateless, shared by its threads."""

    def __init__(
        self,
        *,
        registry: TypeRegistry,
        config: ProcessingConfig,
        audit: AuditLog,
        observer: EngineObserver,
        report: StepReport,
        committed: StepCommitted,
    ) -> None:
        self._registry = registry
        self._config = config
        self._audit = audit
        self._observer = observer
        self._report = report
        self._committed = committed

    def fail_alone(
        self, session: Session, claim: lease_repository.Claim, state: StepState, error: Exception
    ) -> Step:
        """A lone item's step failed and was rolled back: record the failure on its own."""
        started = time.monotonic()
        try:
            entries = self._record_failure(session, claim, state, error)
            if entries is None:
                session.rollback()
                self._observer.lease_lost(claim.item_type)
                return Step(Ending.LOST, state, started)
            session.commit()
        except Exception as failure:
            if is_database_unavailable(failure):
                raise DatabaseUnavailableError from failure
            raise
        return self._after_failure_of(claim, state, entries, started)

    def fail_again(
        self, session: Session, units: Sequence[StepUnit], exclude: Collection[uuid.UUID] = ()
    ) -> dict[uuid.UUID, Step]:
        """Record anew, each on its own, the failures a discarded batch had recorded: their
        actions did fail, and running them again at once would ignore a `Retry-After`."""
        steps = {}
        for unit in units:
            error = unit.error
            # Those with nothing recorded (lease lost, failure hook raised) run again.
            if error is None or unit.item_id in exclude or isinstance(error, _NOT_RECORDED):
                continue
            try:
                steps[unit.item_id] = self.fail_alone(session, unit.claim, unit.state, error)
            except DatabaseUnavailableError:
                raise
            except Exception:
                session.rollback()
                logger.exception("could not record the failure of %s", unit.item_id)
        return steps

    def fail_in_batch(self, session: Session, unit: StepUnit) -> list[AuditEntry]:
        """Record one item's failure inside the batch (its own part already undone).

        Returns the audit entries to write after the commit; an empty list
        means nothing could be recorded (lease lost, or the type's failure
        hook raised): the item then ends LOST or RELEASED (`after_failure`).
        """
        assert unit.error is not None  # noqa: S101 - caller checked
        unit.discard(session)
        savepoint = session.begin_nested()
        try:
            entries = self._record_failure(session, unit.claim, unit.state, unit.error)
        except Exception as failure:
            savepoint.rollback()
            if is_database_unavailable(failure):
                raise
            logger.exception("could not record the failure of %s", unit.item_id)
            unit.state.failed_by_executor = False
            unit.error = _UnrecordedError(str(failure))
            return []
        if entries is None:
            savepoint.rollback()
            unit.error = _LostError()
            return []
        savepoint.commit()
        return entries

    def after_failure(self, unit: StepUnit, entries: list[AuditEntry], started: float) -> Step:
        """How a batch item whose failure `fail_in_batch` handled ends, once the batch committed."""
        if isinstance(unit.error, _LostError):
            self._observer.lease_lost(unit.claim.item_type)
            return Step(Ending.LOST, unit.state, started)
        if isinstance(unit.error, _UnrecordedError):
            return Step(Ending.RELEASED, unit.state, started)
        return self._after_failure_of(unit.claim, unit.state, entries, started)

    def _after_failure_of(
        self,
        claim: lease_repository.Claim,
        state: StepState,
        entries: list[AuditEntry],
        started: float,
    ) -> Step:
        if state.action_started is not None:
            state.action_seconds = time.monotonic() - state.action_started
        state.events.clear()  # rolled back with the step
        outcome = entries[0].after["outcome"] if entries and entries[0].after else "failed"
        self._report(claim.item_type, state, str(outcome))
        self._audit.write_all(entries)
        self._committed(claim, state)
        return Step(Ending.FAILED, state, started)

    def _record_failure(
        self,
        session: Session,
        claim: lease_repository.Claim,
        state: StepState,
        error: Exception,
    ) -> list[AuditEntry] | None:
        """Count a failed step: back off, or fail the item. None when the lease is gone."""
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
        # An outage (GitLab rate-limiting or unreachable) backs off as usual
        # but never ends the item: it is not the action failing.
        max_attempts = _NEVER_FINAL if is_outage(error) else self._config.max_attempts
        final = lease_repository.failure_is_final(
            session, claim, permanent=permanent, max_attempts=max_attempts
        )
        if final is None:
            return None
        if final:
            self._failure_hook(session, claim, message)
        outcome = lease_repository.record_failure(
            session,
            claim,
            error=message,
            permanent=final,
            max_attempts=max_attempts,
            backoff_initial_seconds=self._config.backoff_initial_seconds,
            backoff_max_seconds=self._config.backoff_max_seconds,
            not_before_seconds=retry_after_seconds(error),
        )
        if outcome is None:
            return None
        if outcome.phase == Phase.FAILED:
            outbox.emit_phase_reached(
                session,
                Phase.FAILED,
                work_item_id=claim.item_id,
                item_type=claim.item_type,
                project=outcome.project_path,
                error=message,
            )
        if outcome.retry_in_seconds is not None:
            state.wake_within(outcome.retry_in_seconds)
        return _failure_entries(claim, state, outcome, message, permanent=permanent)

    def _failure_hook(self, session: Session, claim: lease_repository.Claim, message: str) -> None:
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


def owed_failures(units: Sequence[StepUnit]) -> list[OwedFailure]:
    """The action failures of a step that is being discarded, to record again."""
    return [
        OwedFailure(unit.claim, unit.state, unit.error)
        for unit in units
        if unit.error is not None
        and not isinstance(unit.error, _NOT_RECORDED)
        and not is_database_unavailable(unit.error)
        and not is_lock_conflict(unit.error)
    ]


def _failure_entries(
    claim: lease_repository.Claim,
    state: StepState,
    outcome: lease_repository.FailureOutcome,
    message: str,
    *,
    permanent: bool,
) -> list[AuditEntry]:
    item_type = state.item_type or claim.item_type
    entries = [
        AuditEntry(
            event_type="action_outcome",
            work_item_id=claim.item_id,
            item_type=item_type,
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
                item_type=item_type,
                before={"phase": Phase.ACTIVE.value},
                after={"phase": Phase.FAILED.value},
                reason=message,
            )
        )
    return entries


class _LostError(Exception):
    """Marks a batch item whose failure found its lease gone."""


class _UnrecordedError(Exception):
    """Marks a batch item whose failure could not be recorded (its failure hook raised)."""


_NOT_RECORDED = (_LostError, _UnrecordedError)


def _describe(error: Exception) -> str:
    text = str(error) or type(error).__name__
    if not isinstance(error, PermanentError):
        text = f"{type(error).__name__}: {text}"
    return text[:MAX_ERROR_LENGTH]
