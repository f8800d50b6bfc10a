"""ProcessingManager: finds due items, claims them and runs them on a bounded pool.

Threads:

* the dispatcher claims work when something may be due: an in-process
  `notify()`, a NOTIFY from another replica, the timer set to the earliest
  backoff / deferral / lease expiry, a freed worker while a backlog exists,
  or the slow safety sweep (which also prunes deliveries and history and
  drops old finished items' contents). Idle, it issues no SQL until the
  safety sweep;
* the worker pool (DDR-41) runs `ItemLoop` for each claim;
* the heartbeat extends the leases this process holds (fenced on tokens) and
  tells workers whose lease was lost;
* the listener (optional) turns NOTIFYs into local wake-ups;
* the intake resolver (`intake_loop`) turns stored deliveries into events.
"""

from __future__ import annotations

import gc
import logging
import threading
import time
import uuid
from collections import Counter, deque
from collections.abc import Callable, Collection
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

from sqlalchemy.orm import Session, sessionmaker

from workqueue.queue.audit.log import AuditLog
from workqueue.queue.background import BackgroundService
from workqueue.queue.intake import pending_events as ingest
from workqueue.queue.intake.resolver import IntakeResolver
from workqueue.queue.listener import WakeListener
from workqueue.queue.observer import EngineObserver
from workqueue.queue.processing import lease_repository, sweeps
from workqueue.queue.processing.claims_run import ClaimOutcome, ClaimResult
from workqueue.queue.processing.config import ProcessingConfig
from workqueue.queue.processing.dispatch_plan import (
    DispatchPlan,
    DispatchState,
    plan_dispatch,
    step_batch_size,
)
from workqueue.queue.processing.give_way import GiveWay
from workqueue.queue.processing.item_loop import ItemCommitted, ItemLoop
from workqueue.queue.registry import TypeRegistry
from workqueue.queue.retention import contents as content_retention
from workqueue.queue.submission_keys import repository as submission_key_repository

logger = logging.getLogger(__name__)

# Claims may wait for a free worker: a little prefetch lets one claim
# transaction feed several workers. Queued claims are heartbeated like
# running ones, so prefetching never lets a lease lapse.
MIN_PREFETCH = 8
# With a backlog, a worker steps several claims per transaction (up to
# `processing.step_batch_size`); the manager then holds enough claims for
# each worker's running batch and its next one, but never more than about
# this much work per worker, judged by how long items took recently: fast
# items are claimed by the hundred, slow ones (GitLab calls) a few at a time,
# leaving the rest to other replicas.
QUEUED_WORK_SECONDS = 1.0
BATCHES_HELD_PER_WORKER = 2
INITIAL_SECONDS_PER_ITEM = 0.25
# When something is due but could not be claimed (a row locked for a moment
# by another transaction), look again after this long rather than spinning.
RETRY_DUE_SECONDS = 0.25


WAKE_BATCH_SIZE = sweeps.WAKE_BATCH_SIZE

_startup_heap_frozen = threading.Event()


def freeze_startup_heap() -> None:
    """Exclude what exists at the first start (modules, mappings, configuration)
    from the cyclic garbage collector's full collections, once per process.

    Those objects live as long as the process, yet every full collection
    walks them all while holding the GIL, stalling every worker: on the
    engine benchmark three full collections took 0.2-0.3 s of a 2.3 s run,
    0.003 s once frozen. Garbage is collected first, so nothing that is
    already garbage is kept; frozen objects are still freed by reference
    counting when they are released.
    """
    if _startup_heap_frozen.is_set():
        return
    _startup_heap_frozen.set()
    gc.collect()
    gc.freeze()


def run_wake_ups(
    sessions: sessionmaker[Session],
    item_types: Collection[str],
    *,
    events: bool,
    deferrals: bool,
    batch_size: int = WAKE_BATCH_SIZE,
    on_batch: Callable[[int], None] | None = None,
) -> int:
    """Wake idle items holding events (`events`) and due deferrals (`deferrals`).

    In batches of at most `batch_size` items, one transaction each: every
    woken item's advisory lock is held until its batch commits, so however
    many items came due (after downtime: tens of thousands) the sweep never
    needs more than a batch's worth of the shared lock table. Returns the
    number of wake-ups.
    """
    kinds = []
    if events:
        kinds.append(sweeps.wake_items_with_events)
    if deferrals:
        kinds.append(sweeps.wake_due_deferrals)
    total = 0
    for wake in kinds:
        while True:
            with sessions() as session:
                woken = wake(session, item_types, limit=batch_size)
                session.commit()
            total += len(woken)
            if on_batch is not None and woken:
                on_batch(len(woken))
            if not woken:
                break
    return total


class ProcessingManager(BackgroundService):
    """Runs the engine for the item types this replica handles (DDR-25)."""

    def __init__(
        self,
        *,
        sessions: sessionmaker[Session],
        registry: TypeRegistry,
        config: ProcessingConfig,
        handled_types: Collection[str],
        audit: AuditLog | None = None,
        listen_conninfo: str | None = None,
        observer: EngineObserver | None = None,
        on_item_committed: ItemCommitted | None = None,
        request_lag: Callable[[], float] | None = None,
        content_retention: timedelta | None = None,
    ) -> None:
        """`request_lag`: how far behind the process's request path is, in seconds
        (`queue.give_way`); None when nothing serves requests here.
        `content_retention`: the safety sweep drops finished items' contents this long
        after they finished (`retention.content_days`); None keeps them."""
        unknown = set(handled_types) - registry.item_types
        if unknown:
            raise ValueError(f"handled_types names unregistered item types: {sorted(unknown)}")
        self.item_types = frozenset(handled_types)
        self._sessions = sessions
        self._registry = registry
        self._content_retention = content_retention
        self._config = config
        self._observer = observer or EngineObserver()
        self._audit = audit or AuditLog()
        self._loop = ItemLoop(
            sessions=sessions,
            registry=registry,
            config=config,
            audit=self._audit,
            observer=self._observer,
            on_committed=on_item_committed,
        )
        self._on_item_committed = on_item_committed
        self._give_way = None if request_lag is None else GiveWay(request_lag)
        self._min_capacity = config.workers + max(config.workers, MIN_PREFETCH)
        self._capacity = self._min_capacity
        # Refill the prefetch queue in batches rather than one claim per finished item.
        self._refill_batch = max(1, (self._capacity - config.workers) // 2)
        self._seconds_per_item = INITIAL_SECONDS_PER_ITEM
        self._pool = ThreadPoolExecutor(config.workers, thread_name_prefix="workqueue-item")

        self._lock = threading.Lock()
        self._held: dict[uuid.UUID, lease_repository.Claim] = {}  # claimed: queued or running
        self._queued: deque[lease_repository.Claim] = deque()  # claimed, waiting for a worker
        self._running = 0
        self._tasks = 0  # worker tasks submitted and not yet finished (at most `workers`)
        self._busy_workers = 0  # workers stepping a batch right now
        self._lost: set[uuid.UUID] = set()
        self._requested: set[uuid.UUID] = set()  # woken, not yet tried
        self._rerun: set[uuid.UUID] = set()  # woken while held: try again when released
        self._heartbeat_stop = threading.Event()
        self._sweep_at = 0.0  # monotonic; 0 = sweep at once (startup recovery, DDR-35)
        self._due_at: float | None = None  # monotonic time of the earliest known due work
        # Due times that finishing claims report while a due-time query runs: the
        # query cannot see them (it leaves out what was held when it started).
        self._due_reported_meanwhile: list[float] | None = None
        self._timer_stale = True
        self._backlog = False

        super().__init__(
            thread_name="workqueue-dispatch",
            listener=(
                WakeListener(listen_conninfo, on_wake=self._on_remote_wake, on_connected=self.sweep)
                if listen_conninfo and self.item_types
                else None
            ),
        )
        self._heartbeat = threading.Thread(
            target=self._heartbeat_forever, name="workqueue-heartbeat", daemon=True
        )
        # Stored deliveries become events here, whichever types this replica runs.
        self.intake = IntakeResolver(
            sessions=sessions,
            registry=registry,
            on_items=self._notify_all,
            sweep_seconds=config.safety_sweep_seconds,
            listen_conninfo=listen_conninfo,
        )

    # -- public API ----------------------------------------------------------

    def start(self) -> None:
        freeze_startup_heap()
        self.intake.start()
        if not self.item_types:
            logger.warning("handled_types is empty: this replica processes no items")
            return
        super().start()
        self._heartbeat.start()
        logger.info(
            "processing %s with %d workers",
            ", ".join(sorted(self.item_types)),
            self._config.workers,
        )

    def notify(self, item_id: uuid.UUID) -> None:
        """Ask for `item_id` to be looked at soon (after a commit that enqueued work)."""
        with self._lock:
            self._requested.add(item_id)
        self._wake.set()

    def _notify_all(self, item_ids: list[uuid.UUID]) -> None:
        with self._lock:
            self._requested.update(item_ids)
        self._wake.set()

    def report_change(self, item_id: uuid.UUID, project_path: str | None) -> None:
        """An item changed outside the engine (a request's commit): tell the change listener."""
        if self._on_item_committed is not None:
            self._on_item_committed(item_id, project_path)

    def sweep(self) -> None:
        """Run the safety sweep at the next opportunity."""
        with self._lock:
            self._sweep_at = 0.0
        self._wake.set()

    @property
    def held_count(self) -> int:
        with self._lock:
            return len(self._held)

    def stop(self, timeout: float = 30.0) -> bool:
        """Stop claiming, let running steps finish (up to `timeout`), release the leases;
        True when the dispatcher ended."""
        self.intake.stop(timeout)
        return super().stop(timeout)

    def after_stop(self, _ended: bool, timeout: float, /) -> None:
        # Workers notice `_stopping` between steps and release their claims;
        # queued claims start, see it at once and release too.
        deadline = time.monotonic() + timeout
        while self.held_count and time.monotonic() < deadline:
            time.sleep(0.02)
        self._pool.shutdown(wait=False, cancel_futures=False)
        self._heartbeat_stop.set()
        if self._heartbeat.is_alive():
            self._heartbeat.join(timeout)
        if self.held_count:
            logger.warning(
                "%d items still running after %.0f s; their leases will expire",
                self.held_count,
                timeout,
            )

    # -- dispatcher ----------------------------------------------------------

    def round_failed(self, error: Exception, failures: int, delay: float) -> None:
        super().round_failed(error, failures, delay)
        # Whatever was missed while failing is found by a sweep.
        with self._lock:
            self._sweep_at = 0.0
            self._timer_stale = True

    def seconds_until_next_round(self) -> float:
        now = time.monotonic()
        with self._lock:
            at_capacity = len(self._held) >= self._capacity
            if self._requested and not at_capacity:
                return 0.0
            wake_at = self._sweep_at
            # At capacity, a finishing worker wakes us; due work can wait for it.
            if self._due_at is not None and not at_capacity:
                wake_at = min(wake_at, self._due_at)
        return max(wake_at - now, 0.0)

    def run_round(self) -> None:
        plan = self._plan_dispatch()
        if plan is None:
            return
        claims: list[lease_repository.Claim] = []
        if plan.sweep or plan.timer_fired:
            run_wake_ups(self._sessions, self.item_types, events=plan.sweep, deferrals=True)
        if plan.sweep and self._content_retention is not None:
            content_retention.sweep_contents(
                self._sessions, self._registry, age=self._content_retention
            )
        with self._sessions() as session:
            if plan.sweep:
                ingest.prune_deliveries(session)
                submission_key_repository.prune_expired(session)
                self._audit.prune_history(session)  # at most hourly; never raises
            if plan.requested:
                claims += self._claim(
                    session, min(plan.free, len(plan.requested)), only_ids=plan.requested
                )
            if plan.claim_any and plan.free > len(claims):
                limit = plan.free - len(claims)
                general = self._claim(session, limit)
                self._backlog = len(general) == limit
                claims += general
            session.commit()
            with self._lock:
                for claim in claims:
                    self._held[claim.item_id] = claim
                if plan.requested - {claim.item_id for claim in claims}:
                    # A woken item could not be claimed: usually idle already or
                    # leased elsewhere, but possibly made claimable an instant
                    # later with no further wake-up (a lock held at that moment).
                    # Let the due-time query decide when to look again.
                    self._timer_stale = True
                    self._wake.set()
            try:
                if plan.recompute_timer:
                    self._recompute_timer(session)
            finally:
                # Queued even if the timer query failed: a claim held but in
                # no queue would be heartbeated forever and never run. After
                # that query, not before: a claim finishing meanwhile sets a
                # due time the query's answer must not overwrite.
                self._queue_claims(claims)

    def _recompute_timer(self, session: Session) -> None:
        with self._lock:
            held = list(self._held)
            self._due_reported_meanwhile = []
        try:
            seconds = sweeps.seconds_until_due(session, self.item_types, held=held)
            session.commit()
        finally:
            with self._lock:
                meanwhile, self._due_reported_meanwhile = self._due_reported_meanwhile, None
        found = None if seconds is None else time.monotonic() + max(seconds, RETRY_DUE_SECONDS)
        with self._lock:
            # A claim that was held when the query started and has since set
            # its retry time is not in the answer: overwriting would lose it.
            self._due_at = min([*meanwhile, *([] if found is None else [found])], default=None)

    def _queue_claims(self, claims: list[lease_repository.Claim]) -> None:
        with self._lock:
            self._queued.extend(claims)
            # A task steps batches until the queue is empty, so at most one
            # per worker is needed (a task per claim cost the dispatcher more
            # time in creating futures than in claiming).
            tasks = max(0, min(len(self._queued), self._config.workers - self._tasks))
            self._tasks += tasks
        for _ in range(tasks):
            self._pool.submit(self._run_queued)

    def _plan_dispatch(self) -> DispatchPlan | None:
        now = time.monotonic()
        with self._lock:
            plan = plan_dispatch(
                DispatchState(
                    capacity=self._capacity,
                    held=frozenset(self._held),
                    running=self._running,
                    requested=frozenset(self._requested),
                    backlog=self._backlog,
                    refill_batch=self._refill_batch,
                    sweep_at=self._sweep_at,
                    due_at=self._due_at,
                    timer_stale=self._timer_stale,
                ),
                now,
                sweep_interval=self._config.safety_sweep_seconds,
            )
            self._timer_stale = False
            self._due_at = plan.next_due_at
            self._sweep_at = plan.next_sweep_at
            if plan.requests_taken:
                self._rerun |= plan.rerun
                self._requested.clear()
        return plan if plan.has_work else None

    def _claim(
        self,
        session: Session,
        limit: int,
        *,
        only_ids: Collection[uuid.UUID] | None = None,
    ) -> list[lease_repository.Claim]:
        if limit <= 0:
            return []
        started = time.monotonic()
        with self._lock:
            held = list(self._held)
        claims = lease_repository.claim_due_items(
            session,
            item_types=self.item_types,
            limit=limit,
            lease_seconds=self._config.lease_seconds,
            only_ids=only_ids,
            held=held,
        )
        seconds = time.monotonic() - started
        for item_type, count in Counter(claim.item_type for claim in claims).items():
            self._observer.items_claimed(item_type, count, seconds)
        return claims

    # -- workers ---------------------------------------------------------------

    def _run_queued(self) -> None:
        """A worker's task: step batches of queued claims until none is left."""
        try:
            while batch := self._take_batch():
                # Under more work than the process can do, the answers go first.
                if self._give_way is not None:
                    waited = self._give_way.wait(self._stopping.is_set)
                    if waited.seconds > 0:
                        self._observer.gave_way(waited.seconds, overdue=waited.overdue)
                self._run_batch(batch)
        except BaseException:
            with self._lock:
                self._tasks -= 1
            raise

    def _run_batch(self, batch: list[lease_repository.Claim]) -> None:
        ended: set[uuid.UUID] = set()

        def claim_ended(claim: lease_repository.Claim, result: ClaimResult) -> None:
            ended.add(claim.item_id)
            self._claim_finished(claim, result)

        started = time.monotonic()
        try:
            self._loop.run_batch(
                batch,
                should_stop=self._stopping.is_set,
                lease_lost=self._lost.__contains__,
                on_end=claim_ended,
            )
        except Exception:
            logger.exception("unexpected error processing %d items", len(batch))
        finally:
            with self._lock:
                self._busy_workers -= 1
            for claim in batch:
                if claim.item_id not in ended:
                    self._claim_finished(claim, ClaimResult(ClaimOutcome.RELEASED))
            self._learn_item_time((time.monotonic() - started) / len(batch))

    def _learn_item_time(self, seconds: float) -> None:
        """Fold one batch's time per item into the estimate that sizes the claim queue."""
        with self._lock:
            self._seconds_per_item = 0.8 * self._seconds_per_item + 0.2 * seconds
            per_worker = int(QUEUED_WORK_SECONDS / max(self._seconds_per_item, 1e-4))
            held = BATCHES_HELD_PER_WORKER * self._config.step_batch_size
            per_worker = max(1, min(per_worker, held))
            self._capacity = max(self._min_capacity, self._config.workers * per_worker)
            self._refill_batch = max(1, (self._capacity - self._config.workers) // 2)

    def _take_batch(self) -> list[lease_repository.Claim]:
        """The oldest queued claim and, when a backlog waits, more of its type.

        An empty queue ends the calling task (nothing is returned).

        Sized by `dispatch_plan.step_batch_size`: with a short queue every
        claim gets a worker of its own, fast items share a transaction, slow
        ones go one at a time.
        """
        with self._lock:
            if not self._queued:
                # Under the lock that adding claims takes: the dispatcher
                # either sees this task gone or this task sees its claims.
                self._tasks -= 1
                return []
            first = self._queued.popleft()
            size = step_batch_size(
                queued=len(self._queued) + 1,
                free_workers=self._config.workers - self._busy_workers,
                limit=self._config.step_batch_size,
                seconds_per_item=self._seconds_per_item,
                step_seconds=self._config.step_batch_seconds,
            )
            batch = [first]
            others: list[lease_repository.Claim] = []
            while self._queued and len(batch) < size:
                claim = self._queued.popleft()
                (batch if claim.item_type == first.item_type else others).append(claim)
            self._queued.extendleft(reversed(others))
            self._running += len(batch)
            self._busy_workers += 1
            return batch

    def _claim_finished(self, claim: lease_repository.Claim, result: ClaimResult) -> None:
        with self._lock:
            self._running -= 1
            if self._held.get(claim.item_id) is claim:
                del self._held[claim.item_id]
                self._lost.discard(claim.item_id)
            if claim.item_id in self._rerun or (
                result.outcome is ClaimOutcome.RELEASED and not self._stopping.is_set()
            ):
                # Woken while we held it, or out of time: look at it again.
                self._rerun.discard(claim.item_id)
                self._requested.add(claim.item_id)
            if result.outcome is ClaimOutcome.LOST:
                # Usually another replica has it; if the database lost our
                # claim instead (a crash), the timer query finds it again.
                self._timer_stale = True
            if result.wake_in_seconds is not None:
                due = time.monotonic() + max(result.wake_in_seconds, 0.0)
                self._due_at = due if self._due_at is None else min(self._due_at, due)
                if self._due_reported_meanwhile is not None:
                    self._due_reported_meanwhile.append(due)
        self._wake.set()

    # -- heartbeat ---------------------------------------------------------------

    def _heartbeat_forever(self) -> None:
        while not self._heartbeat_stop.wait(self._config.heartbeat_seconds):
            with self._lock:
                claims = list(self._held.values())
            if not claims:
                continue
            try:
                with self._sessions() as session:
                    still_ours = lease_repository.extend_leases(
                        session, claims, self._config.lease_seconds
                    )
                    session.commit()
            except Exception as error:
                logger.warning("heartbeat failed: %s", error)
                continue
            with self._lock:
                for claim in claims:
                    # A claim released since the snapshot is not "lost".
                    if claim.item_id not in still_ours and self._held.get(claim.item_id) is claim:
                        logger.warning("lease on %s was taken over", claim.item_id)
                        self._lost.add(claim.item_id)

    def _on_remote_wake(self, item_type: str, item_id: uuid.UUID) -> None:
        if item_type in self.item_types:
            self.notify(item_id)
