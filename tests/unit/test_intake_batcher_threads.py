"""Where the webhook batcher's transactions run: on its own threads, at most
`MAX_IN_FLIGHT` at once, in the context of the request that started them."""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import Sequence
from typing import Any

from workqueue.api.intake_batcher import MAX_IN_FLIGHT, STORE_ALLOWANCE_SECONDS, IntakeBatcher
from workqueue.queue.ingest import IngestStatus

REQUEST = contextvars.ContextVar("request", default="none")


class Recording(IntakeBatcher):
    """Stores nothing: records where each batch ran and how many ran at once."""

    def __init__(self) -> None:
        super().__init__(None)  # type: ignore[arg-type] - no database here
        self.batches: list[tuple[str, str, int]] = []
        self._lock = threading.Lock()
        self._running = 0
        self.most_at_once = 0
        # The first two batches wait for each other: proof that two run at once.
        self._first_two = threading.Barrier(MAX_IN_FLIGHT, timeout=10)
        self._calls = 0

    def _write(self, deliveries: Sequence[Any]) -> list[IngestStatus]:
        with self._lock:
            self._running += 1
            self._calls += 1
            first_two = self._calls <= MAX_IN_FLIGHT
            self.most_at_once = max(self.most_at_once, self._running)
        if first_two:
            self._first_two.wait()
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
        return await asyncio.gather(*(request(n) for n in range(20)))

    statuses = asyncio.run(main())

    assert statuses == ["duplicate" if n == 3 else "accepted" for n in range(20)]
    assert sum(size for _, _, size in batcher.batches) == 20
    assert len(batcher.batches) < 20  # those that waited went together
    assert batcher.most_at_once == MAX_IN_FLIGHT
    assert all(thread.startswith("webhook-intake") for thread, _, _ in batcher.batches)
    # Each drain runs in the context of the request that started it.
    assert {context for _, context, _ in batcher.batches} <= {f"r{n}" for n in range(20)}
    assert "r0" in {context for _, context, _ in batcher.batches}


class Slow(IntakeBatcher):
    """Stores nothing; each transaction waits until the test lets it go."""

    def __init__(self) -> None:
        super().__init__(None)  # type: ignore[arg-type] - no database here
        self.release = threading.Event()
        self.writing = threading.Event()

    def _write(self, deliveries: Sequence[Any]) -> list[IngestStatus]:
        self.writing.set()
        assert self.release.wait(timeout=10)
        return ["accepted"] * len(deliveries)


def test_behind_counts_the_oldest_deliverys_wait_beyond_one_transaction():
    """`behind()` (read by the workers, `queue.give_way`): how long the oldest
    delivery not yet answered has waited past `STORE_ALLOWANCE_SECONDS`."""
    batcher = Slow()
    readings: dict[str, float] = {}

    async def main() -> list[IngestStatus]:
        readings["idle"] = batcher.behind()
        first = asyncio.ensure_future(batcher.store("a"))  # type: ignore[arg-type]
        await asyncio.to_thread(batcher.writing.wait, 10)
        readings["at once"] = batcher.behind()
        await asyncio.sleep(STORE_ALLOWANCE_SECONDS + 0.1)
        later = [asyncio.ensure_future(batcher.store(name)) for name in "bcd"]  # type: ignore[arg-type]
        await asyncio.sleep(0)
        # The oldest delivery counts, not the newest.
        readings["stuck"] = batcher.behind()
        # Read from another thread, as the workers do.
        readings["from a thread"] = await asyncio.to_thread(batcher.behind)
        batcher.release.set()
        statuses = await asyncio.gather(first, *later)
        readings["answered"] = batcher.behind()
        return statuses

    statuses = asyncio.run(main())

    assert statuses == ["accepted"] * 4
    assert readings["idle"] == 0.0
    assert readings["at once"] == 0.0
    assert readings["stuck"] >= 0.09
    assert readings["from a thread"] >= readings["stuck"]
    assert readings["answered"] == 0.0


class OneByOne(IntakeBatcher):
    """Stores nothing; transaction n waits for `releases[n]`."""

    def __init__(self) -> None:
        super().__init__(None)  # type: ignore[arg-type] - no database here
        self.releases = [threading.Event() for _ in range(3)]
        self.started = [threading.Event() for _ in range(3)]
        self._calls = 0
        self._lock = threading.Lock()

    def _write(self, deliveries: Sequence[Any]) -> list[IngestStatus]:
        with self._lock:
            number, self._calls = self._calls, self._calls + 1
        self.started[number].set()
        assert self.releases[number].wait(timeout=10)
        return ["accepted"] * len(deliveries)


def test_behind_follows_the_oldest_delivery_still_unanswered():
    batcher = OneByOne()
    readings: dict[str, float] = {}

    async def main() -> None:
        first = asyncio.ensure_future(batcher.store("a"))  # type: ignore[arg-type]
        await asyncio.to_thread(batcher.started[0].wait, 10)
        await asyncio.sleep(0.3)
        second = asyncio.ensure_future(batcher.store("b"))  # type: ignore[arg-type]
        await asyncio.to_thread(batcher.started[1].wait, 10)
        await asyncio.sleep(STORE_ALLOWANCE_SECONDS + 0.05)
        readings["both stuck"] = batcher.behind()
        batcher.releases[0].set()
        await first
        readings["first answered"] = batcher.behind()
        batcher.releases[1].set()
        await second
        readings["all answered"] = batcher.behind()

    asyncio.run(main())

    assert readings["both stuck"] >= 0.3
    # The second delivery is now the oldest: it has waited about 0.07 s in all.
    assert 0.0 < readings["first answered"] < 0.25
    assert readings["all answered"] == 0.0
