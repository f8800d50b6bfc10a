"""Cross-replica wake-ups: LISTEN on the channel that enqueuers NOTIFY on commit."""

from __future__ import annotations

import contextlib
import logging
import select
import socket
import threading
import uuid
from collections.abc import Callable

import psycopg

from workqueue.queue.enqueue import WAKE_CHANNEL

logger = logging.getLogger(__name__)


class ChannelListener:
    """A thread holding one LISTEN connection; reconnects with backoff when it drops.

    Waiting for notifications is a blocking wait on the connection's socket: an
    idle listener sends no SQL at all. The wait also watches a socket pair of its
    own, so `stop()` ends it at once instead of after a polling interval (each
    app's shutdown waited up to half a second for it).
    """

    def __init__(
        self,
        conninfo: str,
        *,
        channel: str,
        on_notify: Callable[[str], None],
        on_connected: Callable[[], None],
        thread_name: str = "workqueue-listen",
        description: str = "wake-up listener",
    ) -> None:
        self._conninfo = conninfo
        self._channel = channel
        self._on_notify = on_notify
        self._on_connected = on_connected
        self._description = description
        self._stop = threading.Event()
        # Made by start() and closed by the thread as it ends: a listener that is
        # never started holds no sockets.
        self._stop_signal: socket.socket | None = None
        self._stop_sender: socket.socket | None = None
        self._thread = threading.Thread(target=self._run, name=thread_name, daemon=True)

    def start(self) -> None:
        self._stop_signal, self._stop_sender = socket.socketpair()
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        if self._stop_sender is not None:
            with contextlib.suppress(OSError):  # the thread has ended and closed it
                self._stop_sender.send(b"x")
        if self._thread.ident is not None:  # never started: nothing to wait for
            self._thread.join(timeout)

    def _run(self) -> None:
        try:
            if self._stop_signal is not None:  # always: start() made it
                self._listen_until_stopped(self._stop_signal)
        finally:
            for end in (self._stop_signal, self._stop_sender):
                if end is not None:
                    end.close()

    def _listen_until_stopped(self, stop_signal: socket.socket) -> None:
        delay = 0.2
        while not self._stop.is_set():
            try:
                with psycopg.connect(self._conninfo, autocommit=True) as connection:
                    connection.execute(f"LISTEN {self._channel}")
                    delay = 0.2
                    # Anything sent while we were not listening was lost: the
                    # manager sweeps once per (re)connection to catch up.
                    self._on_connected()
                    while self._wait_readable(connection, stop_signal):
                        # What has arrived, without waiting for more.
                        for notification in connection.notifies(timeout=0):
                            self._on_notify(notification.payload)
            except psycopg.Error as error:
                if self._stop.is_set():
                    return
                logger.warning("%s lost its connection (%s); retrying", self._description, error)
                self._stop.wait(delay)
                delay = min(delay * 2, 10.0)

    def _wait_readable(
        self, connection: psycopg.Connection[tuple[object, ...]], stop_signal: socket.socket
    ) -> bool:
        """Wait until the connection has something to read; False once stopping."""
        while not self._stop.is_set():
            readable, _, _ = select.select([connection.fileno(), stop_signal.fileno()], [], [])
            if stop_signal.fileno() in readable or self._stop.is_set():
                return False
            if readable:
                return True
        return False


class WakeListener(ChannelListener):
    """Listens on the engine's wake-up channel; payloads are `item_type:item_id`."""

    def __init__(
        self,
        conninfo: str,
        *,
        on_wake: Callable[[str, uuid.UUID], None],
        on_connected: Callable[[], None],
    ) -> None:
        super().__init__(
            conninfo, channel=WAKE_CHANNEL, on_notify=self._deliver, on_connected=on_connected
        )
        self._on_wake = on_wake

    def _deliver(self, payload: str) -> None:
        item_type, _, raw_id = payload.partition(":")
        try:
            item_id = uuid.UUID(raw_id)
        except ValueError:
            logger.warning("ignoring malformed wake-up payload %r", payload)
            return
        self._on_wake(item_type, item_id)
