"""Workers give way to the request path when it falls behind.

One process serves HTTP on its event loop and runs steps on worker threads,
and the GIL is theirs to share. Under more events than the process can step,
the workers would take the interpreter from the request path and webhook
answers would wait seconds (GitLab gives up on a hook after 10 s, and
disables hooks that keep failing). The process tells the engine how far
behind its answers are (`api.app`: how late the event loop wakes while
requests are in flight, and how long webhook deliveries wait for their
commit). While that is over a threshold, a worker about to start a batch
waits; once it has been far over (`SEVERE_LAG_SECONDS`), the workers keep
waiting for `HOLD_SECONDS` after the last such reading.

Processing slows but never stops: a batch that has waited
`MAX_WAIT_PER_BATCH_SECONDS` may start as an overdue batch, and the whole
process starts at most one overdue batch per `OVERDUE_INTERVAL_SECONDS`,
the longest-waiting first, so under lasting pressure no batch waits more
than about `MAX_WAIT_PER_BATCH_SECONDS + (workers - 1) *
OVERDUE_INTERVAL_SECONDS` (2.75 s with 10 workers). A batch's transaction
ends after about `processing.step_batch_seconds`, so under pressure the
workers get a bounded share of the interpreter. Events wait meanwhile and
coalesce: fewer, larger steps once the burst is over.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from typing import NamedTuple

# Lag (seconds) above which the request path counts as behind: twice the
# interpreter's switch interval (5 ms), which a loop waits anyway whenever a
# worker holds the interpreter.
LAG_THRESHOLD_SECONDS = 0.01
# Far behind, the process stays behind this long after the last such
# reading. A backlogged intake's figures dip for an instant whenever a commit
# answers its batch, and workers that started in every dip kept the answers
# as slow as no rule did. Holding from the first threshold instead protected
# the answers best under overload but, at the rate the service is sized for,
# slowed executor start three- to four-fold (docs/benchmarks.md).
SEVERE_LAG_SECONDS = 0.1
HOLD_SECONDS = 0.25
# One wait, between two readings.
WAIT_SECONDS = 0.01
# A batch that has waited this long may start as an overdue batch ...
MAX_WAIT_PER_BATCH_SECONDS = 0.5
# ... and the process starts at most one overdue batch per this interval.
OVERDUE_INTERVAL_SECONDS = 0.25


class Waited(NamedTuple):
    seconds: float
    overdue: bool  # the batch started while the request path was still behind


class GiveWay:
    """One process's rule for when a worker may start a batch (thread-safe)."""

    def __init__(
        self,
        lag: Callable[[], float],
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        """`lag`: how far behind the request path is now, in seconds."""
        self._lag = lag
        self._clock = clock
        self._sleep = sleep
        self._lock = threading.Lock()
        self._behind_until = -math.inf
        self._next_overdue_at = -math.inf
        self._waiting: list[_Waiter] = []  # oldest first

    def behind(self) -> bool:
        """Whether the request path is behind now, or was within `HOLD_SECONDS`."""
        lag = self._lag()
        now = self._clock()
        with self._lock:
            if lag > SEVERE_LAG_SECONDS:
                self._behind_until = max(self._behind_until, now + HOLD_SECONDS)
            return lag > LAG_THRESHOLD_SECONDS or now < self._behind_until

    def wait(self, should_stop: Callable[[], bool]) -> Waited:
        """Wait before a batch while the request path is behind. Ends at once when
        `should_stop()` turns true."""
        waiter = _Waiter(self._clock())
        with self._lock:
            self._waiting.append(waiter)
        overdue = False
        try:
            while not should_stop() and self.behind():
                due = self._clock() - waiter.since >= MAX_WAIT_PER_BATCH_SECONDS
                if due and self._overdue_may_start(waiter):
                    overdue = True
                    break
                self._sleep(WAIT_SECONDS)
        finally:
            with self._lock:
                self._waiting.remove(waiter)
        return Waited(self._clock() - waiter.since, overdue)

    def _overdue_may_start(self, waiter: _Waiter) -> bool:
        now = self._clock()
        with self._lock:
            # One per interval, and the batch that has waited longest goes first.
            if now < self._next_overdue_at or self._waiting[0] is not waiter:
                return False
            self._next_overdue_at = now + OVERDUE_INTERVAL_SECONDS
            return True


class _Waiter:
    """A worker waiting before its batch (compared by identity)."""

    __slots__ = ("since",)

    def __init__(self, since: float) -> None:
        self.since = since
