"""Which scopes (projects) owe reconciliation, and when each may run next (pure, in memory).

A scope owes one of two things. A **whole cycle** (startup, rule changes, a
listener's reconnection: anything may have changed) walks the scope's items
by id up to an upper id fixed when it starts; scope-wide signals to a scope
that already waits coalesce into a generation bump, and when the last page
is read the generation decides whether one arrived meanwhile (another
cycle). **Items** (a committed step or request names the item it changed)
are looked at by id, a page of them per pass, so a busy project costs what
changed in it rather than all its items. Either way a reconciled scope is
forgotten (no timer, no SQL). Passes over one scope are a continuation
(1 s) apart, so a stream of changes is taken a page at a time; failing
scopes back off 1 s → 60 s, and signals never shorten that wait.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Collection
from dataclasses import dataclass, field
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
    generation: int = 0  # bumped by scope-wide signals
    failures: int = 0  # consecutive
    cycle: Cycle | None = None
    whole: bool = False  # a whole cycle is owed (or runs: `cycle`)
    items: set[uuid.UUID] = field(default_factory=set)  # owed a look, by id


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
        """Anything in the scope may have changed: it owes a whole cycle."""
        with self._lock:
            state = self._state(scope)
            state.generation += 1
            state.whole = True

    def signal_items(self, scope: Scope, item_ids: Collection[uuid.UUID]) -> None:
        """These items of the scope changed: each owes a look."""
        with self._lock:
            self._state(scope).items.update(item_ids)

    def owes_whole_cycle(self, scope: Scope) -> bool:
        with self._lock:
            state = self._states.get(scope)
            return state is not None and (state.whole or state.cycle is not None)

    def take_items(self, scope: Scope, limit: int) -> list[uuid.UUID]:
        """Up to `limit` of the items the scope owes a look, in id order, taken off its set:
        `items_done` or `return_items` settles them."""
        with self._lock:
            state = self._states.get(scope)
            if state is None:
                return []
            taken = sorted(state.items)[:limit]
            state.items.difference_update(taken)
            return taken

    def return_items(self, scope: Scope, item_ids: Collection[uuid.UUID]) -> None:
        """Items taken for a pass that did not look at them: still owed."""
        with self._lock:
            state = self._states.get(scope)
            if state is not None:
                state.items.update(item_ids)

    def items_done(self, scope: Scope, *, rows: int, failed: Collection[uuid.UUID]) -> bool:
        """Record a pass over taken items (`failed` are owed again, after a backoff); True
        when the scope is now reconciled and forgotten."""
        with self._lock:
            state = self._states.get(scope)
            if state is None:
                return False
            now = self._clock.now()
            if failed:
                state.items.update(failed)
                state.failures += 1
                state.due_at = now + self._backoff(state.failures)
                return False
            if rows:
                state.failures = 0  # real progress ends an outage's backoff
            if not state.items and not state.whole and state.cycle is None:
                del self._states[scope]
                return True
            state.due_at = max(state.due_at, now + self._continuation)
            return False

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
        """The scope's current cycle, starting one at the current generation if none runs.

        A starting cycle reads every item as it is from now on, so the items owed a
        look so far are covered by it; those signalled later stay owed.
        """
        with self._lock:
            state = self._state(scope)
            if state.cycle is None:
                state.cycle = Cycle(started_generation=state.generation)
                state.whole = True
                state.items.clear()
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
            state.whole = state.generation != cycle.started_generation
            if state.whole or state.items:
                state.due_at = now + (self._backoff(state.failures) if state.failures else 0.0)
                state.due_at = max(state.due_at, now + self._continuation)
                return False
            del self._states[scope]
            return True

    def _state(self, scope: Scope) -> ScopeState:
        """The scope's state, a new one due now if it owed nothing (the caller holds the lock)."""
        state = self._states.get(scope)
        if state is None:
            state = self._states[scope] = ScopeState(due_at=self._clock.now())
        return state

    def _after(self, scope: Scope, seconds: float) -> None:
        with self._lock:
            state = self._states.get(scope)
            if state is not None:
                state.due_at = max(state.due_at, self._clock.now() + seconds)

    def _backoff(self, failures: int) -> float:
        return float(min(self._backoff_initial * 2 ** (failures - 1), self._backoff_max))
