"""The processing loop: step a batch of claims until each is idle, failed or released.

A step is one transaction for a batch of claimed items of one type: one query
reads them all, each item drains its events, gets its next action decided
and executed (`item_step`), and one statement ends them all, idling or
continuing each item fenced on its own lease token (`step_repository`).
A worker that lost a lease (it stalled past expiry and another replica took
over) commits nothing of that step. How a failed step is recorded is
`failures.FailureRecorder`'s.

Batches are only as large as the backlog warrants (the manager decides) and
a step stops taking more of its batch once it has run for
`processing.step_batch_seconds`: items with slow actions (GitLab calls) end
up one per transaction, fast ones share a commit.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from sqlalchemy.orm import Session, sessionmaker

from workqueue.db.errors import is_database_unavailable, is_lock_conflict
from workqueue.queue.audit.log import AuditEntry, AuditLog
from workqueue.queue.models import WorkItem
from workqueue.queue.observer import EngineObserver
from workqueue.queue.processing import lease_repository, step_repository
from workqueue.queue.processing.claims_run import (
    ClaimOutcome,
    ClaimResult,
    ClaimsRun,
    DatabaseUnavailableError,
    Ending,
    Step,
)
from workqueue.queue.processing.config import ProcessingConfig
from workqueue.queue.processing.failures import FailureRecorder, owed_failures
from workqueue.queue.processing.item_step import (
    LeaseLost,
    ShouldStop,
    StepState,
    StepUnit,
    run_unit,
)
from workqueue.queue.registry import TypeRegistry

logger = logging.getLogger(__name__)

ItemCommitted = Callable[[uuid.UUID, str | None], None]
"""Told (item id, project path) after a commit that changed the item; must not raise."""


class _LeasesLostError(Exception):
    """Some items of the batch are no longer ours: the whole step is discarded."""

    def __init__(self, item_ids: set[uuid.UUID]) -> None:
        super().__init__(f"{len(item_ids)} leases lost")
        self.item_ids = item_ids


@dataclass
class _Batch:
    """The claims one step works on, and what became of each."""

    claims: Sequence[lease_repository.Claim]
    started: float  # monotonic
    units: list[StepUnit] = field(default_factory=list)
    steps: dict[uuid.UUID, Step] = field(default_factory=dict)
    failures: list[tuple[StepUnit, list[AuditEntry]]] = field(default_factory=list)

    @property
    def isolated(self) -> bool:
        """Several items share the transaction: each one's failure must stay its own."""
        return len(self.claims) > 1


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
        self._failures = FailureRecorder(
            registry=registry,
            config=config,
            audit=audit,
            observer=self._observer,
            report=self._report,
            committed=self._committed,
        )

    def run(
        self,
        claim: lease_repository.Claim,
        *,
        should_stop: ShouldStop,
        lease_lost: Callable[[], bool],
    ) -> ClaimResult:
        """Process one claim until it ends (see `run_batch`)."""
        results = self.run_batch(
            [claim], should_stop=should_stop, lease_lost=lambda _item_id: lease_lost()
        )
        return results[claim.item_id]

    def run_batch(
        self,
        claims: Sequence[lease_repository.Claim],
        *,
        should_stop: ShouldStop,
        lease_lost: LeaseLost,
        on_end: Callable[[lease_repository.Claim, ClaimResult], None] | None = None,
    ) -> dict[uuid.UUID, ClaimResult]:
        """Process claims of one item type until each one ends; returns how each ended.

        `on_end` hears of each claim as soon as it ends, while others go on.
        """
        run = ClaimsRun(claims, deadline_seconds=self._config.item_deadline_seconds, on_end=on_end)
        reconnect_delay = 0.2
        while run.pending:
            for claim in [claim for claim in run.pending if lease_lost(claim.item_id)]:
                run.end(claim, ClaimOutcome.LOST)
            stopping = should_stop()
            for claim in [claim for claim in run.pending if stopping or run.out_of_time(claim)]:
                run.end(claim, self._release(claim))
            if not run.pending:
                break
            try:
                if run.owed:
                    self._record_owed(run)
                    continue
                steps = self._step(run.pending[: run.batch_limit])
            except _SplitBatchError as split:
                run.batch_limit = 1
                run.record(split.failed)
                continue
            except DatabaseUnavailableError as error:
                # The database went away mid-step: nothing was committed, and it
                # is not the actions' fault. Keep the claims and try again until
                # the database is back or the deadline passes; failures the step
                # had recorded are recorded first then.
                run.owe(error.owed)
                logger.warning(
                    "database unavailable or lock conflict while processing %d items: %s",
                    len(run.pending),
                    error.__cause__,
                )
                time.sleep(reconnect_delay)
                reconnect_delay = min(reconnect_delay * 2, 5.0)
                continue
            run.record(steps)
        return run.results

    # -- one step ------------------------------------------------------------

    def _step(self, claims: Sequence[lease_repository.Claim]) -> dict[uuid.UUID, Step]:
        batch = _Batch(claims, started=time.monotonic())
        try:
            return self._step_batch(batch)
        except DatabaseUnavailableError as error:
            raise DatabaseUnavailableError(owed_failures(batch.units)) from error.__cause__
        except Exception as error:
            # Also a connection lost under a driver-level statement, which can
            # surface only when leaving the session (its rollback fails too).
            if is_database_unavailable(error) or is_lock_conflict(error):
                raise DatabaseUnavailableError(owed_failures(batch.units)) from error
            raise

    def _step_batch(self, batch: _Batch) -> dict[uuid.UUID, Step]:
        claims = batch.claims
        with self._sessions() as session:
            try:
                self._run_units(session, batch)
                succeeded = [unit for unit in batch.units if unit.error is None]
                endings = self._finish(session, succeeded, lone=not batch.isolated)
                # In the step's own transaction: history of a step that rolls
                # back never claims it happened.
                entries = [entry for unit in succeeded for entry in unit.state.audit]
                stored = self._audit.store_in(session, entries)
                session.commit()
            except _LeasesLostError as lost:
                session.rollback()
                for item_id in lost.item_ids:
                    logger.warning("lease on %s was lost; discarding this step", item_id)
                    self._observer.lease_lost(claims[0].item_type)
                # The others did nothing wrong: they run again in the next step.
                return {
                    item_id: Step(Ending.LOST, StepState(), batch.started)
                    for item_id in lost.item_ids
                } | self._failures.fail_again(session, batch.units, exclude=lost.item_ids)
            except Exception as error:
                if is_database_unavailable(error):
                    session.invalidate()  # no rollback on a dead connection
                    raise DatabaseUnavailableError from error
                if is_lock_conflict(error):
                    raise DatabaseUnavailableError from error
                session.rollback()
                if batch.isolated:
                    # Not one item's error (those stay with their item): run
                    # each claim on its own, where an error is its item's.
                    logger.warning("batched step failed (%s); stepping items one by one", error)
                    raise _SplitBatchError(
                        self._failures.fail_again(session, batch.units)
                    ) from error
                state = batch.units[0].state if batch.units else StepState(claims[0].item_type)
                return {
                    claims[0].item_id: self._failures.fail_alone(session, claims[0], state, error)
                }
        self._audit.write_all(entries, stored=stored)
        for unit in succeeded:
            self._report(unit.claim.item_type, unit.state, "succeeded")
            batch.steps[unit.item_id] = Step(endings[unit.item_id], unit.state, batch.started)
            if unit.state.action is not None or unit.state.events:
                self._committed(unit.claim, unit.state)
        for unit, failure_entries in batch.failures:
            batch.steps[unit.item_id] = self._failures.after_failure(
                unit, failure_entries, batch.started
            )
        return batch.steps

    def _record_owed(self, run: ClaimsRun) -> None:
        """Record, each on its own, the failures a discarded step had recorded; the claims
        recorded end in `run`, those recorded before a database error too."""
        steps: dict[uuid.UUID, Step] = {}
        try:
            with self._sessions() as session:
                for failure in list(run.owed.values()):
                    claim = failure.claim
                    steps[claim.item_id] = self._failures.fail_alone(
                        session, claim, failure.state, failure.error
                    )
                    del run.owed[claim.item_id]
        except DatabaseUnavailableError:
            raise
        except Exception as error:
            if is_database_unavailable(error) or is_lock_conflict(error):
                raise DatabaseUnavailableError(list(run.owed.values())) from error
            raise
        finally:
            run.record(steps)

    def _run_units(self, session: Session, batch: _Batch) -> None:
        """Each claim's part, in order, until the step's time budget is spent."""
        registration = self._registry.get(batch.claims[0].item_type)
        snapshots = step_repository.load_batch(
            session, registration.model, [claim.item_id for claim in batch.claims]
        )
        budget_end = batch.started + self._config.step_batch_seconds
        for claim in batch.claims:
            if batch.units and time.monotonic() >= budget_end:
                return  # the rest waits for the next transaction
            snapshot = snapshots.get(claim.item_id)
            state = StepState(item_type=claim.item_type)
            if snapshot is None:
                batch.steps[claim.item_id] = Step(Ending.GONE, state, batch.started)
            elif snapshot.item.lease_token != claim.lease_token:
                batch.steps[claim.item_id] = Step(Ending.LOST, state, batch.started)
                self._lease_lost_warning(claim)
            else:
                state.loaded, state.project_path = True, snapshot.item.project_path
                unit = StepUnit(claim, registration, snapshot, state, batch.isolated)
                batch.units.append(unit)
                run_unit(session, unit, self._observer)
                if unit.error is not None:
                    self._unit_failed(session, batch, unit)

    def _unit_failed(self, session: Session, batch: _Batch, unit: StepUnit) -> None:
        assert unit.error is not None  # noqa: S101 - caller checked
        if not batch.isolated:
            raise unit.error  # a lone item: the whole step rolls back (see `_step`)
        if unit.entangled:
            raise _SplitBatchError({})  # its writes cannot be undone alone
        # At once: its savepoint must not enclose the next item's.
        batch.failures.append((unit, self._failures.fail_in_batch(session, unit)))

    def _finish(
        self, session: Session, units: Sequence[StepUnit], *, lone: bool
    ) -> dict[uuid.UUID, Ending]:
        """Write the batch's dimension rows and consumed events, then end every item's step."""
        session.flush()  # the items' own changes first: they move `updated_at`
        step_repository.write_step_rows(
            session,
            ((unit.item_id, update) for unit in units for update in unit.dimension_writes),
            [event_id for unit in units for event_id in unit.consumed_events],
        )
        ends = [
            step_repository.StepEnd(
                unit.claim,
                unit.seen_updated_at,
                # Going idle is decided under the item's advisory lock (DDR-34):
                # enqueuers take the same lock, so their work is either visible
                # to the decision or lands after our commit and wakes the item.
                want_idle=not unit.more_work,
                # An executor that failed the item itself keeps the error it
                # wrote (a success would clear it).
                action_succeeded=unit.state.action is not None
                and not unit.state.failed_by_executor,
            )
            for unit in units
        ]
        answers = step_repository.finish_steps(
            session, ends, lease_seconds=self._config.lease_seconds, wait_for_locks=lone
        )
        lost = {unit.item_id for unit in units} - answers.keys()
        if lost:
            raise _LeasesLostError(lost)
        return {
            item_id: Ending.IDLE if answer == "idle" else Ending.CONTINUE
            for item_id, answer in answers.items()
        }

    def _committed(self, claim: lease_repository.Claim, state: StepState) -> None:
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

    def _report(self, item_type: str, state: StepState, outcome: str) -> None:
        for event_type, event_outcome in state.events:
            self._observer.event_applied(item_type, event_type, event_outcome)
        if state.action is not None:
            self._observer.action_finished(
                item_type, state.action.name, outcome, state.action_seconds
            )

    def _lease_lost_warning(self, claim: lease_repository.Claim) -> None:
        logger.warning("lease on %s was lost; discarding this step", claim.item_id)
        self._observer.lease_lost(claim.item_type)

    def _release(self, claim: lease_repository.Claim) -> ClaimOutcome:
        try:
            with self._sessions() as session:
                released = lease_repository.release_lease(session, claim)
                session.commit()
        except Exception as error:
            if not is_database_unavailable(error):
                raise
            logger.warning("could not release %s (it will expire): %s", claim.item_id, error)
            return ClaimOutcome.RELEASED
        return ClaimOutcome.RELEASED if released else ClaimOutcome.LOST


class _SplitBatchError(Exception):
    """A batched step failed outside any one item's part: retry its items one by one,
    but for those whose own failure is recorded already (`failed`)."""

    def __init__(self, failed: dict[uuid.UUID, Step]) -> None:
        super().__init__(f"{len(failed)} failures recorded")
        self.failed = failed
