"""Hooks through which the engine reports what it does (metrics, tracing).

The engine calls an `EngineObserver`; the default does nothing, and the
application plugs in one that feeds Prometheus. Observers must be cheap and
must not raise.
"""

from __future__ import annotations

import uuid


class EngineObserver:
    """No-op base: override what you need."""

    def items_claimed(self, item_type: str, count: int, seconds: float) -> None:
        """A claim transaction leased `count` items of a type in `seconds`."""

    def action_started(self, item_type: str, action: str, item_id: uuid.UUID) -> None:
        """An executor is about to run (latency measurements, tracing)."""

    def action_finished(self, item_type: str, action: str, outcome: str, seconds: float) -> None:
        """An executor ran: outcome is succeeded, failed or permanent_failure."""

    def event_applied(self, item_type: str, event_type: str, outcome: str) -> None:
        """A pending event was drained: outcome is applied, stale or ignored."""

    def lease_lost(self, item_type: str) -> None:
        """A claim's lease was found taken over; its step was discarded."""

    def gave_way(self, seconds: float, *, overdue: bool) -> None:
        """A worker waited `seconds` before a batch for the request path to catch up
        (`queue.give_way`); `overdue`: the batch then started without it having."""
