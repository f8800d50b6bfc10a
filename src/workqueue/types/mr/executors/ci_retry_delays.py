"""The book of delayed CI retries: when each one is due, per replica (DDR-47)."""

from __future__ import annotations

import threading
import uuid
from datetime import datetime, timedelta

# Bookings not settled within this are forgotten (the item moved on).
_FORGET_BOOKINGS_AFTER = timedelta(days=1)


class RetryDelays:
    """When each delayed retry is due, by (item id, job id). In-process, thread-safe.

    The first run that wants to retry a job with a delay books `now + delay` and
    defers the dimension until then; the run the deferral wakes finds the booking
    due and retries. Keyed by job id, so the next failure (a new job) waits its
    own delay, and an event re-setting the dimension early only defers for what
    is left. The engine's sweep clears `pending_until` when it wakes an item, so
    the dimension row cannot tell a woken run from a fresh one; this book can.
    It is per replica and not durable: after a restart, or on another replica,
    the delay is waited once more (later, never earlier). Bookings not settled
    within a day are forgotten.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._due: dict[tuple[uuid.UUID, int], datetime] = {}

    def remaining(self, key: tuple[uuid.UUID, int], delay: timedelta, now: datetime) -> timedelta:
        """How long the retry of `key` must still wait (booking it on first sight)."""
        if delay <= timedelta(0):
            return timedelta(0)
        with self._lock:
            horizon = now - _FORGET_BOOKINGS_AFTER
            for stale in [k for k, due in self._due.items() if due < horizon]:
                del self._due[stale]
            due = self._due.setdefault(key, now + delay)
        return max(due - now, timedelta(0))

    def forget(self, key: tuple[uuid.UUID, int]) -> None:
        with self._lock:
            self._due.pop(key, None)

    def __len__(self) -> int:
        with self._lock:
            return len(self._due)
