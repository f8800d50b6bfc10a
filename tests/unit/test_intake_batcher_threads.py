"""Where the webhook batcher's transactions run: on its own threads, at most
`MAX_IN_FLIGHT` at once, in the context of the request that started them."""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import Sequence
from typing import Any

from workqueue.api.intake_batcher import MAX_IN_FLIGHT, IntakeBatcher
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
