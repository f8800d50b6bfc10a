"""Scrape-time gauges that query the database, served from a short cache.

A scrape storm (several Prometheus servers, a dashboard refreshing, a
misconfigured interval) then costs at most one query per gauge and interval:
concurrent scrapes wait for the one refresh in progress and share its answer.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

from prometheus_client.core import Metric
from prometheus_client.registry import Collector


class CachedCollector(Collector):
    """Serves `collector`'s last answer for `seconds` (0: always fresh)."""

    def __init__(self, collector: Collector, seconds: float) -> None:
        self._collector = collector
        self._seconds = seconds
        self._lock = threading.Lock()
        self._metrics: list[Metric] = []
        self._collected_at: float | None = None

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            now = time.monotonic()
            if self._collected_at is None or now - self._collected_at >= self._seconds:
                # A failed query yields nothing; that is cached too, so a
                # database in trouble is not asked again on every scrape.
                self._metrics = list(self._collector.collect())
                self._collected_at = time.monotonic()
            metrics = self._metrics
        yield from metrics
