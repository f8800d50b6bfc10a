"""Serve a FastAPI app with uvicorn in a thread, for tests that talk real HTTP to it."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress

import httpx
import uvicorn
from fastapi import FastAPI


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class _PromptServer(uvicorn.Server):
    """uvicorn's server, whose main loop ends as soon as it is told to.

    uvicorn looks at `should_exit` every 0.1 s; about 1,000 tests start and stop an
    app, so the test server is woken instead, and says when its startup is over
    instead of being polled for it.
    """

    _exit: asyncio.Event | None = None
    _loop: asyncio.AbstractEventLoop | None = None

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.startup_over = threading.Event()

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        try:
            await super().startup(sockets)
        finally:  # started or not: a failed lifespan startup sets should_exit instead
            self.startup_over.set()

    async def main_loop(self) -> None:
        self._exit, self._loop = asyncio.Event(), asyncio.get_running_loop()
        counter = 0
        while not await self.on_tick(counter):  # on_tick keeps the Date header current
            counter = (counter + 1) % 864_000
            with suppress(TimeoutError):
                await asyncio.wait_for(self._exit.wait(), 0.1)

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        # uvicorn always sleeps 0.1 s for open connections to wind down; with none
        # open there is nothing to wait for: the same steps without the sleep.
        if self.server_state.connections or self.server_state.tasks:
            await super().shutdown(sockets)
            return
        for server in self.servers:
            server.close()
        for sock in sockets or []:
            sock.close()
        for server in self.servers:
            await server.wait_closed()
        if not self.force_exit:
            await self.lifespan.shutdown()

    def exit_now(self) -> None:
        self.should_exit = True
        if self._loop is not None and self._exit is not None:
            self._loop.call_soon_threadsafe(self._exit.set)


@contextmanager
def serve_in_thread(app: FastAPI) -> Iterator[str]:
    """Yield the base URL while the app (and its lifespan) runs."""
    # Bound here and handed to uvicorn: a port probed free and bound later can be taken
    # in between (by another xdist worker's server, or any client's ephemeral port).
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    port = int(listener.getsockname()[1])
    server = _PromptServer(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(
        target=server.run, kwargs={"sockets": [listener]}, name="test-uvicorn", daemon=True
    )
    thread.start()
    deadline = time.monotonic() + 30
    while not server.startup_over.wait(0.1):
        if not thread.is_alive() or time.monotonic() > deadline:
            break
    if not server.started:
        raise RuntimeError("the test app did not start")
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.exit_now()
        thread.join(30)
        listener.close()


@contextmanager
def live_client(app: FastAPI, **options: object) -> Iterator[httpx.Client]:
    with (
        serve_in_thread(app) as base_url,
        httpx.Client(base_url=base_url, timeout=30, **options) as client,
    ):  # type: ignore[arg-type]
        yield client
