"""Where the webhook batcher's transactions run: on its own threads, at most
`MAX_IN_FLIGHT` at once, in the context of the request that started them."""

from __future__ import annotations

import asyncio
import contextvars
import threading
import time
from collections.abc import Sequence
from typing import Any

from workqueue.api.webhooks.batcher import MAX_IN_FLIGHT, IntakeBatcher
from workqueue.queue.intake.pending_events import IngestStatus

REQUEST = contextvars.ContextVar("request", default="none")


class Recording(IntakeBatcher):
    """Stores nothing: records where each batch ran and how many ran at once."""

    def __init__(self) -> None:
        super().__init__(None)  # type: ignore[arg-type] - no database here
        self.batches: list[tuple[str, str, int]] = []
        self._lock = threading.Lock()
        self._running = 0
        self.most_at_once = 0
        # The first two batches wait for each other (proof that two run at once)
        # and for every request to have arrived, so that the rest must queue.
        self._first_two = threading.Barrier(MAX_IN_FLIGHT, timeout=10)
        self.all_arrived = threading.Event()
        self._calls = 0

    def _write(self, deliveries: Sequence[Any]) -> list[IngestStatus]:
        with self._lock:
            self._running += 1
            self._calls += 1
            first_two = self._calls <= MAX_IN_FLIGHT
            self.most_at_once = max(self.most_at_once, self._running)
        if first_two:
            self._first_two.wait()
            assert self.all_arrived.wait(timeout=10)
        with self._lock:
            self._running -= 1
            self.batches.append((threading.current_thread().name, REQUEST.get(), len(deliveries)))
        return ["duplicate" if delivery == "seen" else "accepted" for delivery in deliveries]


def test_batches_run_on_the_batchers_threads_in_the_requests_context():
    batcher = Recording()

    async def request(n: int) -> IngestStatus:
        REQUEST.set(f"r{n}")
        await asyncio.sleep(0.001 * n)  # arriving one after another, as requests do
        return await batcher.store("seen" if n == 3 else "new")  # type: ignore[arg-type]

    async def main() -> list[IngestStatus]:
        requests = asyncio.gather(*(request(n) for n in range(20)))
        await asyncio.sleep(0.05)  # after every request's own sleep (at most 19 ms)
        batcher.all_arrived.set()
        return await requests

    statuses = asyncio.run(main())

    assert statuses == ["duplicate" if n == 3 else "accepted" for n in range(20)]
    assert sum(size for _, _, size in batcher.batches) == 20
    assert len(batcher.batches) < 20  # those that waited went together
    assert batcher.most_at_once == MAX_IN_FLIGHT
    assert all(thread.startswith("webhook-intake") for thread, _, _ in batcher.batches)
    # Each drain runs in the context of the request that started it.
    assert {context for _, context, _ in batcher.batches} <= {f"r{n}" for n in range(20)}
    assert "r0" in {context for _, context, _ in batcher.batches}


class Timed(IntakeBatcher):
    """Stores nothing; how long its transactions take, and how late they start."""

    def __init__(self, *, in_database: float = 0.0, late_start: float = 0.0) -> None:
        super().__init__(None)  # type: ignore[arg-type] - no database here
        self.in_database = in_database
        self.late_start = late_start
        self.returned = threading.Event()

    def _timed_write(self, handoff: Any, deliveries: Sequence[Any]) -> list[IngestStatus]:
        time.sleep(self.late_start)  # the thread gets the interpreter late
        try:
            return super()._timed_write(handoff, deliveries)
        finally:
            self.returned.set()

    def _write(self, deliveries: Sequence[Any]) -> list[IngestStatus]:
        time.sleep(self.in_database)  # waiting on PostgreSQL releases the interpreter
        return ["accepted"] * len(deliveries)


def _read_behind_meanwhile(batcher: IntakeBatcher, after: float) -> list[float]:
    """`behind()` read from another thread, as the workers do, `after` seconds on."""
    readings: list[float] = []
    reader = threading.Timer(after, lambda: readings.append(batcher.behind()))
    reader.start()
    return readings


def test_time_in_the_database_is_not_behind():
    """A slow commit (here 0.3 s) is not helped by workers waiting: not counted."""
    batcher = Timed(in_database=0.3)

    async def main() -> tuple[list[IngestStatus], list[float]]:
        readings = _read_behind_meanwhile(batcher, 0.15)
        statuses = await asyncio.gather(*(batcher.store("x") for _ in range(5)))  # type: ignore[arg-type]
        return statuses, readings

    statuses, readings = asyncio.run(main())
    assert statuses == ["accepted"] * 5
    assert len(readings) == 1
    assert readings[0] < 0.05
    assert batcher.behind() == 0.0


def test_a_transaction_whose_thread_starts_late_is_behind():
    batcher = Timed(late_start=0.3)

    async def main() -> tuple[IngestStatus, list[float]]:
        readings = _read_behind_meanwhile(batcher, 0.15)
        return await batcher.store("x"), readings  # type: ignore[arg-type]

    status, readings = asyncio.run(main())
    assert status == "accepted"
    assert readings[0] >= 0.1
    assert batcher.behind() == 0.0


def test_an_answer_the_loop_takes_back_late_is_behind():
    batcher = Timed()

    async def main() -> tuple[IngestStatus, list[float]]:
        stored = asyncio.ensure_future(batcher.store("x"))  # type: ignore[arg-type]
        await asyncio.sleep(0)  # the drain starts and hands the transaction to its thread
        await asyncio.sleep(0)
        assert batcher.returned.wait(timeout=10)
        # The transaction is done; the loop is busy and cannot take the answer back.
        readings = _read_behind_meanwhile(batcher, 0.15)
        time.sleep(0.3)  # noqa: ASYNC251 - the point: a busy event loop
        return await stored, readings

    status, readings = asyncio.run(main())
    assert status == "accepted"
    assert readings[0] >= 0.1
    assert batcher.behind() == 0.0
