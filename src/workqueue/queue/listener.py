"""Cross-replica wake-ups: LISTEN on the channel that enqueuers NOTIFY on commit."""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable

import psycopg

from workqueue.queue.repository import WAKE_CHANNEL

logger = logging.getLogger(__name__)


class WakeListener:
    """A thread holding one LISTEN connection; reconnects with backoff when it drops.

    Waiting for notifications is a blocking read on the socket: an idle
    listener sends no SQL at all.
    """

    def __init__(
        self,
        conninfo: str,
        *,
        on_wake: Callable[[str, uuid.UUID], None],
        on_connected: Callable[[], None],
    ) -> None:
        self._conninfo = conninfo
        self._on_wake = on_wake
        self._on_connected = on_connected
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="workqueue-listen", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        self._thread.join(timeout)

    def _run(self) -> None:
        delay = 0.2
        while not self._stop.is_set():
            try:
                with psycopg.connect(self._conninfo, autocommit=True) as connection:
                    connection.execute(f"LISTEN {WAKE_CHANNEL}")
                    delay = 0.2
                    # Anything sent while we were not listening was lost: the
                    # manager sweeps once per (re)connection to catch up.
                    self._on_connected()
                    while not self._stop.is_set():
                        for notification in connection.notifies(timeout=0.5):
                            self._deliver(notification.payload)
            except psycopg.Error as error:
                if self._stop.is_set():
                    return
                logger.warning("wake-up listener lost its connection (%s); retrying", error)
                self._stop.wait(delay)
                delay = min(delay * 2, 10.0)

    def _deliver(self, payload: str) -> None:
        item_type, _, raw_id = payload.partition(":")
        try:
            item_id = uuid.UUID(raw_id)
        except ValueError:
            logger.warning("ignoring malformed wake-up payload %r", payload)
            return
        self._on_wake(item_type, item_id)
