"""The CI retry circuit breaker: at most so many retries in a window, per replica (DDR-47)."""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class BreakerAdmission:
    """The breaker's answer to one retry. `ticket` gives the slot back via `release`."""

    admitted: bool
    wait_seconds: float  # 0 when admitted; else until the breaker closes
    ticket: float | None = None


@dataclass(frozen=True, slots=True)
class BreakerState:
    """A snapshot for metrics: gauges (`open`, `retries_in_window`,
    `seconds_until_close`) and monotonically increasing counters (`*_total`)."""

    open: bool
    retries_in_window: int
    max_retries: int
    window_seconds: float
    seconds_until_close: float
    admitted_total: int
    refused_total: int
    opened_total: int


class RetryCircuitBreaker:
    """At most `max_retries` CI retries in any `window_seconds`, across all items.

    A retry wanted beyond that opens the breaker: every retry is refused for
    `window_seconds` from that moment (retries made before it have then left
    the window, so it closes with a clean slate). The state is in-process:
    each replica has its own breaker. Thread-safe.
    """

    def __init__(
        self,
        max_retries: int,
        window_seconds: float,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if max_retries < 1:
            raise ValueError("max_retries must be at least 1")
        if window_seconds <= 0:
            raise ValueError("window_seconds must be positive")
        self._max = max_retries
        self._window = window_seconds
        self._clock = clock
        self._lock = threading.Lock()
        self._recent: deque[float] = deque()
        self._opened_at: float | None = None
        self._admitted_total = 0
        self._refused_total = 0
        self._opened_total = 0

    def acquire(self) -> BreakerAdmission:
        """Take a retry slot, or learn how long retries are paused."""
        with self._lock:
            now = self._clock()
            self._refresh(now)
            if self._opened_at is None and len(self._recent) >= self._max:
                self._opened_at = now
                self._opened_total += 1
                logger.warning(
                    "CI retry circuit breaker OPEN: %d retries in the last %g s reached the "
                    "limit; retries on this replica are paused for %g s",
                    len(self._recent),
                    self._window,
                    self._window,
                )
            if self._opened_at is not None:
                self._refused_total += 1
                return BreakerAdmission(
                    admitted=False, wait_seconds=self._opened_at + self._window - now
                )
            self._recent.append(now)
            self._admitted_total += 1
            return BreakerAdmission(admitted=True, wait_seconds=0.0, ticket=now)

    def release(self, ticket: float) -> None:
        """Give back a slot whose retry did not happen (GitLab refused it)."""
        with self._lock:
            try:
                self._recent.remove(ticket)
            except ValueError:
                return  # already out of the window
            self._admitted_total -= 1

    def is_open(self) -> bool:
        with self._lock:
            self._refresh(self._clock())
            return self._opened_at is not None

    def state(self) -> BreakerState:
        with self._lock:
            now = self._clock()
            self._refresh(now)
            until_close = 0.0 if self._opened_at is None else self._opened_at + self._window - now
            return BreakerState(
                open=self._opened_at is not None,
                retries_in_window=len(self._recent),
                max_retries=self._max,
                window_seconds=self._window,
                seconds_until_close=until_close,
                admitted_total=self._admitted_total,
                refused_total=self._refused_total,
                opened_total=self._opened_total,
            )

    def _refresh(self, now: float) -> None:
        """Close an expired pause and forget retries older than the window (lock held)."""
        if self._opened_at is not None and now >= self._opened_at + self._window:
            self._opened_at = None
            logger.info("CI retry circuit breaker closed: retries resume")
        horizon = now - self._window
        while self._recent and self._recent[0] <= horizon:
            self._recent.popleft()
