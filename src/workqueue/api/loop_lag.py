"""How late the event loop wakes while it has requests to answer.

A task sleeps for a short tick and records how much later than asked it
woke. With no request in flight the lag is reported as none: busy workers
always delay an idle loop by a switch interval, and nobody waits for it then.
The figure is read from worker threads (`queue.give_way`), so it is a plain
float, written by the loop only.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

TICK_SECONDS = 0.01


class LoopLag:
    def __init__(self, in_flight: Callable[[], int] = lambda: 1) -> None:
        """`in_flight`: how many requests the loop is serving now."""
        self.seconds = 0.0
        self._in_flight = in_flight
        self._task: asyncio.Task[None] | None = None

    def __call__(self) -> float:
        return self.seconds if self._in_flight() > 0 else 0.0

    def start(self) -> None:
        """From the running loop (the lifespan)."""
        self._task = asyncio.get_running_loop().create_task(self._watch())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        self.seconds = 0.0

    async def _watch(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            asked = loop.time() + TICK_SECONDS
            await asyncio.sleep(TICK_SECONDS)
            self.seconds = max(loop.time() - asked, 0.0)
