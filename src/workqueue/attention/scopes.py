"""Which scopes (projects) owe reconciliation, and when each may run next (pure, in memory).

A scope is woken by a signal; signals to a scope that already waits
coalesce into a generation bump. A cycle walks the scope's items by id up
to an upper id fixed when it starts; when its last page is read, the
generation decides whether a signal arrived meanwhile (another cycle) or
the scope is reconciled (forgotten: no timer, no SQL). Failing scopes back
off 1 s → 60 s; signals never shorten that wait.
"""

from __future__ import annotations

import threading
import time
import uuid
from dataclasses import dataclass
from typing import Protocol

Scope = str | None
"""A project path; None for items without a project."""


class Clock(Protocol):
    def now(self) -> float:
        """Seconds on a monotonic scale."""


class MonotonicClock:
    def now(self) -> float:
        return time.monotonic()


@dataclass
class Cycle:
    started_generation: int
    cursor: uuid.UUID | None = None
    upper: uuid.UUID | None = None
    upper_known: bool = False
    failed: bool = False  # some row failed: the scope is owed another cycle


@dataclass
class ScopeState:
    due_at: float
    generation: int = 0
    failures: int = 0  # consecutive
    cycle: Cycle | None = None


class ScopeBoard:
    """Thread-safe; the reconciler thread runs passes, anyone may signal."""

    def __init__(
        self,
        clock: Clock,
        *,
        continuation_seconds: float = 1.0,
        backoff_initial_seconds: float = 1.0,
        backoff_max_seconds: float = 60.0,
    ) -> None:
        self._clock = clock
        self._continuation = continuation_seconds
        self._backoff_initial = backoff_initial_seconds
        self._backoff_max = backoff_max_seconds
        self._lock = threading.Lock()
        self._states: dict[Scope, ScopeState] = {}

    def signal(self, scope: Scope) -> None:
        with self._lock:
            state = self._states.get(scope)
            if state is None:
                state = self._states[scope] = ScopeState(due_at=self._clock.now())
            state.generation += 1

    def pending(self) -> set[Scope]:
        with self._lock:
            return set(self._states)

    def failures(self, scope: Scope) -> int:
        with self._lock:
            state = self._states.get(scope)
            return 0 if state is None else state.failures

    def next_due_at(self) -> float | None:
        with self._lock:
            return min((state.due_at for state in self._states.values()), default=None)

    def due(self) -> list[Scope]:
        """Scopes whose time has come, earliest first (so no scope starves another)."""
        now = self._clock.now()
        with self._lock:
            ready = [(state.due_at, scope) for scope, state in self._states.items()]
        return [scope for due_at, scope in sorted(ready, key=lambda pair: pair[0]) if due_at <= now]

    def begin(self, scope: Scope) -> Cycle:
        """The scope's current cycle, starting one at the current generation if none runs."""
        with self._lock:
            state = self._states.setdefault(scope, ScopeState(due_at=self._clock.now()))
            if state.cycle is None:
                state.cycle = Cycle(started_generation=state.generation)
            return state.cycle

    def busy(self, scope: Scope) -> None:
        """Another replica holds the scope: look again after the continuation delay."""
        self._after(scope, self._continuation)

    def pass_failed(self, scope: Scope) -> None:
        """The pass itself failed (page read, database): back off; the cursor stays."""
        with self._lock:
            state = self._states.get(scope)
            if state is None:
                return
            state.failures += 1
            state.due_at = self._clock.now() + self._backoff(state.failures)

    def page_done(self, scope: Scope, *, rows: int, row_failures: int, complete: bool) -> bool:
        """Record a pass's page; True when the scope is now reconciled and forgotten."""
        with self._lock:
            state = self._states.get(scope)
            if state is None or state.cycle is None:
                return False
            now = self._clock.now()
            if row_failures:
                state.cycle.failed = True
            elif rows:
                state.failures = 0  # real progress ends an outage's backoff
            if not complete:
                state.due_at = now + self._continuation
                return False
            cycle, state.cycle = state.cycle, None
            if cycle.failed:
                state.failures += 1
                state.due_at = now + self._backoff(state.failures)
                return False
            # Checked after the final read: a signal that came during it is kept.
            if state.generation != cycle.started_generation:
                state.due_at = now + (self._backoff(state.failures) if state.failures else 0.0)
                state.due_at = max(state.due_at, now + self._continuation)
                return False
            del self._states[scope]
            return True

    def _after(self, scope: Scope, seconds: float) -> None:
        with self._lock:
            state = self._states.get(scope)
            if state is not None:
                state.due_at = max(state.due_at, self._clock.now() + seconds)

    def _backoff(self, failures: int) -> float:
        return float(min(self._backoff_initial * 2 ** (failures - 1), self._backoff_max))
