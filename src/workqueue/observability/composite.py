"""Fan one engine's reports out to several observers (metrics and tracing).

The engine takes a single `EngineObserver` and expects it never to raise;
an observer that does raise is logged and skipped, so a tracing problem can
neither break a step nor hide the step from the metrics.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Sequence

from workqueue.queue.observer import EngineObserver

logger = logging.getLogger(__name__)


class CompositeObserver(EngineObserver):
    def __init__(self, observers: Sequence[EngineObserver]) -> None:
        self._observers = tuple(observers)

    def _each(self, report: Callable[[EngineObserver], None]) -> None:
        for observer in self._observers:
            try:
                report(observer)
            except Exception:
                logger.exception("engine observer %s failed", type(observer).__name__)

    def items_claimed(self, item_type: str, count: int, seconds: float) -> None:
        self._each(lambda observer: observer.items_claimed(item_type, count, seconds))

    def action_started(self, item_type: str, action: str, item_id: uuid.UUID) -> None:
        self._each(lambda observer: observer.action_started(item_type, action, item_id))

    def action_finished(self, item_type: str, action: str, outcome: str, seconds: float) -> None:
        self._each(lambda observer: observer.action_finished(item_type, action, outcome, seconds))

    def event_applied(self, item_type: str, event_type: str, outcome: str) -> None:
        self._each(lambda observer: observer.event_applied(item_type, event_type, outcome))

    def lease_lost(self, item_type: str) -> None:
        self._each(lambda observer: observer.lease_lost(item_type))

    def gave_way(self, seconds: float, *, overdue: bool) -> None:
        self._each(lambda observer: observer.gave_way(seconds, overdue=overdue))


def combine(observers: Sequence[EngineObserver]) -> EngineObserver:
    """One observer for the engine: the only one as is, several behind a composite."""
    if len(observers) == 1:
        return observers[0]
    return CompositeObserver(observers)
