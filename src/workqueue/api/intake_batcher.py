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

`behind()` tells the processing workers how long deliveries have been
waiting for their commit beyond what one unhurried transaction takes. The
transactions run on threads that share the interpreter with the workers, so
under more events than the process can step, a busy event loop is not the
only way answers fall behind: the batcher's threads wait for the interpreter
too, and a slow commit holds back every request behind it.

The transactions run on the batcher's own `MAX_IN_FLIGHT` threads
(`loop.run_in_executor`, in the context of the request that started the
drain, as `anyio.to_thread` would): anyio's hop to its shared pool cost
about twice as much CPU per batch, and at 200 webhooks/s most batches are one
delivery.
"""

from __future__ import annotations

import asyncio
import contextvars
import itertools
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from sqlalchemy.orm import Session, sessionmaker

from workqueue.db.errors import is_database_unavailable
from workqueue.db.transactions import run_in_transaction
from workqueue.queue.ingest import IngestStatus
from workqueue.queue.intake import store_deliveries
from workqueue.queue.intake_repository import NewDelivery

MAX_BATCH = 200
MAX_IN_FLIGHT = 2
# What storing a delivery may take before the request path counts as behind
# (`behind()`): a transaction and its commit's WAL flush, with room for a
# slow disk. A webhook answer's whole budget is 50 ms at p99.
STORE_ALLOWANCE_SECONDS = 0.02

# A delivery, the future its request awaits, and when it arrived (monotonic).
_Waiting = tuple[NewDelivery, "asyncio.Future[IngestStatus]", float]


class IntakeBatcher:
    """Stores deliveries for requests on one event loop (one per application)."""

    def __init__(self, sessions: sessionmaker[Session]) -> None:
        self._sessions = sessions
        self._waiting: list[_Waiting] = []
        self._in_flight = 0
        # When the oldest delivery of each transaction in flight arrived.
        self._batch_numbers = itertools.count()
        self._batches_arrived: dict[int, float] = {}
        # When the oldest delivery not yet answered arrived, None when there is none.
        # Written on the event loop only; read from worker threads (a plain float).
        self._oldest_arrival: float | None = None
        # Threads start on first use and end with the batcher (or the process).
        self._threads = ThreadPoolExecutor(MAX_IN_FLIGHT, thread_name_prefix="webhook-intake")

    async def store(self, delivery: NewDelivery) -> IngestStatus:
        """Store `delivery` (committed when this returns): "accepted" or "duplicate"."""
        answer: asyncio.Future[IngestStatus] = asyncio.get_running_loop().create_future()
        arrived = time.monotonic()
        self._waiting.append((delivery, answer, arrived))
        if self._oldest_arrival is None:
            self._oldest_arrival = arrived
        if self._in_flight < MAX_IN_FLIGHT:
            self._in_flight += 1
            asyncio.get_running_loop().create_task(self._drain())
        return await answer

    def behind(self) -> float:
        """Seconds the oldest delivery waiting for its commit has waited beyond
        `STORE_ALLOWANCE_SECONDS`; 0 when none has. Safe to call from any thread."""
        oldest = self._oldest_arrival
        if oldest is None:
            return 0.0
        return max(time.monotonic() - oldest - STORE_ALLOWANCE_SECONDS, 0.0)

    async def _drain(self) -> None:
        try:
            while self._waiting:
                batch = self._waiting[:MAX_BATCH]
                del self._waiting[:MAX_BATCH]
                number = next(self._batch_numbers)
                self._batches_arrived[number] = batch[0][2]  # the list is in arrival order
                try:
                    await self._store(batch)
                finally:
                    del self._batches_arrived[number]
                    waiting = [arrived for *_, arrived in self._waiting[:1]]
                    self._oldest_arrival = min(
                        [*self._batches_arrived.values(), *waiting], default=None
                    )
        finally:
            self._in_flight -= 1

    async def _store(self, batch: list[_Waiting]) -> None:
        deliveries = [delivery for delivery, _, _ in batch]
        try:
            context = contextvars.copy_context()  # e.g. the request's trace, for the SQL spans
            statuses = await asyncio.get_running_loop().run_in_executor(
                self._threads, context.run, self._write, deliveries
            )
        except Exception as error:
            if len(batch) == 1 or is_database_unavailable(error):
                for _, answer, _ in batch:
                    _settle(answer, error=error)
                return
            for one in batch:  # find the delivery that fails; the others are stored
                await self._store([one])
            return
        for (_, answer, _), status in zip(batch, statuses, strict=True):
            _settle(answer, status=status)

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
