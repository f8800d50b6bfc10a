"""Prometheus metrics: one registry per app (no import-time globals)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from sqlalchemy.engine import Engine
from sqlalchemy.exc import SQLAlchemyError

from workqueue.observability import metrics_repository
from workqueue.observability.cached import CachedCollector
from workqueue.queue.observer import EngineObserver
from workqueue.queue.registry import TypeRegistry

logger = logging.getLogger(__name__)

# Scrape-time gauges that query the database are cached this long.
METRICS_CACHE_SECONDS = 2.0


class ServiceMetrics(EngineObserver):
    """Engine and GitLab metrics in their own `CollectorRegistry`.

    `engine` serves the scrape-time queries: the small probe pool, not the
    work pool. Their answers are cached for `cache_seconds`.
    """

    def __init__(self, engine: Engine, *, cache_seconds: float = METRICS_CACHE_SECONDS) -> None:
        self.cache_seconds = cache_seconds
        self.registry = CollectorRegistry()
        self.actions = Counter(
            "workqueue_actions",
            "Executor runs by item type, action and outcome",
            ["item_type", "action", "outcome"],
            registry=self.registry,
        )
        self.action_seconds = Histogram(
            "workqueue_action_duration_seconds",
            "Executor run time",
            ["item_type", "action"],
            registry=self.registry,
        )
        self.claims = Counter(
            "workqueue_items_claimed",
            "Items leased by claims",
            ["item_type"],
            registry=self.registry,
        )
        self.claim_seconds = Histogram(
            "workqueue_claim_duration_seconds", "Claim transaction time", registry=self.registry
        )
        self.events = Counter(
            "workqueue_events",
            "Events drained by item type, event type and outcome",
            ["item_type", "event_type", "outcome"],
            registry=self.registry,
        )
        self.events_received = Counter(
            "workqueue_events_received",
            "Events stored for processing",
            ["source"],
            registry=self.registry,
        )
        self.lease_losses = Counter(
            "workqueue_lease_losses",
            "Claims whose lease was taken over",
            ["item_type"],
            registry=self.registry,
        )
        self.give_way_seconds = Counter(
            "workqueue_give_way_seconds",
            "Seconds workers waited before batches for the request path to catch up",
            registry=self.registry,
        )
        self.give_way_batches = Counter(
            "workqueue_give_way_batches",
            "Batches that waited for the request path, by how they started",
            ["start"],
            registry=self.registry,
        )
        self.gitlab_calls = Counter(
            "workqueue_gitlab_calls",
            "GitLab API calls by operation and status",
            ["operation", "status"],
            registry=self.registry,
        )
        self.registry.register(CachedCollector(_ItemsByPhase(engine), cache_seconds))

    def watch_types(self, types: TypeRegistry) -> None:
        """Export each item type's own gauges (e.g. the CI retry circuit breaker) and
        counters (e.g. the MR drift checks)."""
        self.registry.register(_TypeGauges(types))

    # EngineObserver
    def items_claimed(self, item_type: str, count: int, seconds: float) -> None:
        self.claims.labels(item_type).inc(count)
        self.claim_seconds.observe(seconds)

    def action_finished(self, item_type: str, action: str, outcome: str, seconds: float) -> None:
        self.actions.labels(item_type, action, outcome).inc()
        self.action_seconds.labels(item_type, action).observe(seconds)

    def event_applied(self, item_type: str, event_type: str, outcome: str) -> None:
        self.events.labels(item_type, event_type, outcome).inc()

    def lease_lost(self, item_type: str) -> None:
        self.lease_losses.labels(item_type).inc()

    def gave_way(self, seconds: float, *, overdue: bool) -> None:
        self.give_way_seconds.inc(seconds)
        self.give_way_batches.labels("overdue" if overdue else "caught_up").inc()

    def gitlab_call(self, operation: str, status: int | str) -> None:
        self.gitlab_calls.labels(operation, str(status)).inc()

    def gitlab_call_hook(self) -> Callable[[str, int | str], None]:
        return self.gitlab_call


class _TypeGauges(Collector):
    def __init__(self, types: TypeRegistry) -> None:
        self._types = types

    def collect(self) -> Iterator[Metric]:
        for registration in self._types:
            for name, read in registration.gauges.items():
                family = GaugeMetricFamily(
                    f"workqueue_{name}", f"{name} ({registration.item_type})", labels=["item_type"]
                )
                try:
                    family.add_metric([registration.item_type], read())
                except Exception:  # a broken gauge must not break the scrape
                    logger.exception("metrics: gauge %s failed", name)
                    continue
                yield family
            for name, counter in registration.counters.items():
                counted = CounterMetricFamily(
                    f"workqueue_{name}", counter.help, labels=["item_type", *counter.labels]
                )
                try:
                    for values, count in counter.read().items():
                        counted.add_metric([registration.item_type, *values], count)
                except Exception:  # a broken counter must not break the scrape either
                    logger.exception("metrics: counter %s failed", name)
                    continue
                yield counted


class _ItemsByPhase(Collector):
    """Counts items by type and phase at scrape time (one indexed GROUP BY)."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    def collect(self) -> Iterator[Metric]:
        family = GaugeMetricFamily(
            "workqueue_items", "Work items by type and phase", labels=["item_type", "phase"]
        )
        try:
            with self._engine.connect() as connection:
                rows = metrics_repository.items_by_type_and_phase(connection)
        except SQLAlchemyError as error:
            logger.warning("metrics: cannot count items: %s", error)
            return
        for item_type, phase, count in rows:
            family.add_metric([item_type, phase], count)
        yield family
