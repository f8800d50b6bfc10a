"""`Observability`: what `create_app` starts, plugs in and closes, in one place.

Always: HTTP request metrics and the oldest-due-item gauge, in the app's
Prometheus registry. With `SENTRY_DSN`: error reports. With
`OTEL_EXPORTER_OTLP_ENDPOINT` (or `..._TRACES_ENDPOINT`): traces, and a
step-span observer beside the metrics observer. Both optional parts fail at
startup with one line when their extra is missing, never later.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from fastapi import FastAPI
from prometheus_client import CollectorRegistry
from sqlalchemy.engine import Engine

from workqueue.observability.backlog import LastDelivery, OldestDueItem, WaitingDeliveries
from workqueue.observability.cached import CachedCollector
from workqueue.observability.composite import combine
from workqueue.observability.error_reports import ErrorReports
from workqueue.observability.extras import ObservabilityUnavailableError
from workqueue.observability.http_metrics import HTTPMetrics
from workqueue.observability.tracing import Tracing, start_tracing
from workqueue.queue.observer import EngineObserver
from workqueue.queue.registry import TypeRegistry
from workqueue.settings import Settings

__all__ = ["Observability", "ObservabilityUnavailableError"]


class Observability:
    def __init__(self, tracing: Tracing | None, reports: ErrorReports | None) -> None:
        self.tracing = tracing
        self.reports = reports

    @classmethod
    def start(cls, settings: Settings, environ: Mapping[str, str] | None = None) -> Observability:
        """Start what the environment asks for; `environ` defaults to the process's."""
        reports = None
        if settings.sentry_dsn is not None:
            reports = _start_reports(settings.sentry_dsn.get_secret_value())
        try:
            tracing = start_tracing(os.environ if environ is None else environ)
        except Exception:
            if reports is not None:
                reports.close()
            raise
        return cls(tracing, reports)

    def engine_observer(self, metrics: EngineObserver) -> EngineObserver:
        """The observer to give the engine: the metrics one, plus step spans when tracing."""
        observers = [metrics]
        if self.tracing is not None:
            observers.append(self.tracing.engine_observer())
        return combine(observers)

    def instrument(
        self,
        app: FastAPI,
        *,
        registry: CollectorRegistry,
        engine: Engine,
        types: TypeRegistry,
        cache_seconds: float = 0.0,
    ) -> None:
        """Call after the app's own middleware is added: request metrics go outside it.

        `engine` serves the backlog gauges' queries at scrape time (the probe
        pool); their answers are cached for `cache_seconds`.
        """
        registry.register(
            CachedCollector(OldestDueItem(engine, lambda: types.item_types), cache_seconds)
        )
        registry.register(CachedCollector(WaitingDeliveries(engine), cache_seconds))
        registry.register(CachedCollector(LastDelivery(engine), cache_seconds))
        app.add_middleware(HTTPMetrics, registry=registry, fastapi=app)
        if self.tracing is not None:
            self.tracing.instrument(app)

    def close(self) -> None:
        """At shutdown: flush spans and error reports, undo process-wide instrumentation."""
        if self.tracing is not None:
            self.tracing.close()
        if self.reports is not None:
            self.reports.close()


def _start_reports(dsn: str) -> ErrorReports:
    try:
        return ErrorReports(dsn)
    except ObservabilityUnavailableError:
        raise
    except Exception as error:  # sentry_sdk's BadDsn and the like; the DSN itself is not shown
        raise ObservabilityUnavailableError(f"SENTRY_DSN is not usable: {error}") from None
