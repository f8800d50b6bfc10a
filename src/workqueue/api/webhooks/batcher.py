"""Concurrent webhook deliveries stored together: one transaction for all that wait.

A delivery's storage is one statement and a commit; under load most of its
cost is the round trips, the commit's WAL flush and the hop to a worker
thread. Requests hand their delivery to the batcher and await its answer; at
most `MAX_IN_FLIGHT` transactions run at once, each taking every delivery
waiting when it starts (up to `MAX_BATCH`). A lone request is stored at once,
alone; under load batches grow by themselves, and a request waits at most for
the transaction before its own.

A batch that fails for a reason other than an unavailable database is stored
again one delivery per transaction, so one bad delivery fails only its own
request.

`behind()` tells the processing workers how far behind the answers are for
want of the interpreter. The transactions run on threads that share it with
the workers, so under more events than the process can step a busy event
loop is not the only way answers fall behind: a batch waits for a thread to
start its transaction, and for the loop to take the answer back. Time in the
database is not counted: a slow commit is not helped by workers waiting.
"""

from __future__ import annotations

import asyncio
import contextvars
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from sqlalchemy.orm import Session, sessionmaker

from workqueue.db.errors import is_database_unavailable, is_statement_timeout
from workqueue.db.transactions import run_in_transaction
from workqueue.queue.intake.deliveries import store_deliveries
from workqueue.queue.intake.pending_events import IngestStatus
from workqueue.queue.intake.repository import NewDelivery

MAX_BATCH = 200
MAX_IN_FLIGHT = 2
# A store's statements give up after this long (waiting behind a lock, a
# stalled disk): GitLab waits 10 s for an answer; a 503 with Retry-After
# before then frees its sender and says why, where a timeout says nothing.
# Set on the batcher's own connections (`db.engine.build_intake_engine`).
STORE_TIMEOUT_SECONDS = 5.0

_Waiting = tuple[NewDelivery, "asyncio.Future[IngestStatus]"]


class _Handoff:
    """One transaction's way to its thread and back (monotonic seconds)."""

    __slots__ = ("returned", "started", "submitted")

    def __init__(self, submitted: float) -> None:
        self.submitted = submitted
        self.started: float | None = None  # set on the batcher's thread
        self.returned: float | None = None  # set on the batcher's thread

    def waiting(self, now: float) -> float:
        """How long it has been waiting for the interpreter (0 while in the database)."""
        if self.started is None:
            return now - self.submitted
        if self.returned is not None:
            return now - self.returned
        return 0.0


class IntakeBatcher:
    """Stores deliveries for requests on one event loop (one per application)."""

    def __init__(self, sessions: sessionmaker[Session]) -> None:
        self._sessions = sessions
        self._waiting: list[_Waiting] = []
        self._in_flight = 0
        # The transactions in flight (added and removed on the event loop; read
        # from worker threads, which copy it first).
        self._handoffs: set[_Handoff] = set()
        # Threads start on first use and end with the batcher (or the process).
        self._threads = ThreadPoolExecutor(MAX_IN_FLIGHT, thread_name_prefix="webhook-intake")

    async def store(self, delivery: NewDelivery) -> IngestStatus:
        """Store `delivery` (committed when this returns): "accepted" or "duplicate"."""
        answer: asyncio.Future[IngestStatus] = asyncio.get_running_loop().create_future()
        self._waiting.append((delivery, answer))
        if self._in_flight < MAX_IN_FLIGHT:
            self._in_flight += 1
            asyncio.get_running_loop().create_task(self._drain())
        return await answer

    def behind(self) -> float:
        """Seconds the longest-waiting transaction in flight has waited for a thread
        to start it or for the loop to take its answer back; 0 when none waits.
        Safe to call from any thread."""
        now = time.monotonic()
        return max((handoff.waiting(now) for handoff in list(self._handoffs)), default=0.0)

    async def _drain(self) -> None:
        try:
            while self._waiting:
                batch = self._waiting[:MAX_BATCH]
                del self._waiting[:MAX_BATCH]
                await self._store(batch)
        finally:
            self._in_flight -= 1

    async def _store(self, batch: list[_Waiting]) -> None:
        deliveries = [delivery for delivery, _ in batch]
        try:
            statuses = await self._write_on_a_thread(deliveries)
        except Exception as error:
            # A timeout would only repeat for each delivery alone: all answer 503.
            if len(batch) == 1 or is_database_unavailable(error) or is_statement_timeout(error):
                for _, answer in batch:
                    _settle(answer, error=error)
                return
            for one in batch:  # find the delivery that fails; the others are stored
                await self._store([one])
            return
        for (_, answer), status in zip(batch, statuses, strict=True):
            _settle(answer, status=status)

    async def _write_on_a_thread(self, deliveries: Sequence[NewDelivery]) -> list[IngestStatus]:
        handoff = _Handoff(time.monotonic())
        self._handoffs.add(handoff)
        try:
            context = contextvars.copy_context()  # e.g. the request's trace, for the SQL spans
            return await asyncio.get_running_loop().run_in_executor(
                self._threads, context.run, self._timed_write, handoff, deliveries
            )
        finally:
            self._handoffs.discard(handoff)

    def _timed_write(
        self, handoff: _Handoff, deliveries: Sequence[NewDelivery]
    ) -> list[IngestStatus]:
        handoff.started = time.monotonic()
        try:
            return self._write(deliveries)
        finally:
            handoff.returned = time.monotonic()

    def _write(self, deliveries: Sequence[NewDelivery]) -> list[IngestStatus]:
        return run_in_transaction(
            self._sessions, lambda session: store_deliveries(session, deliveries)
        )


def _settle(
    answer: asyncio.Future[IngestStatus],
    *,
    status: IngestStatus | None = None,
    error: BaseException | None = None,
) -> None:
    if answer.done():  # the request went away (cancelled)
        return
    if error is not None:
        answer.set_exception(error)
    elif status is not None:
        answer.set_result(status)
