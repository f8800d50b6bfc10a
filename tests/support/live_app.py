"""Serve a FastAPI app with uvicorn in a thread, for tests that talk real HTTP to it."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import uvicorn
from fastapi import FastAPI


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def serve_in_thread(app: FastAPI) -> Iterator[str]:
    """Yield the base URL while the app (and its lifespan) runs."""
    # Bound here and handed to uvicorn: a port probed free and bound later can be taken
    # in between (by another xdist worker's server, or any client's ephemeral port).
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    port = int(listener.getsockname()[1])
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(
        target=server.run, kwargs={"sockets": [listener]}, name="test-uvicorn", daemon=True
    )
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the test app did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(30)
        listener.close()


@contextmanager
def live_client(app: FastAPI, **options: object) -> Iterator[httpx.Client]:
    with (
        serve_in_thread(app) as base_url,
        httpx.Client(base_url=base_url, timeout=30, **options) as client,
    ):  # type: ignore[arg-type]
        yield client
