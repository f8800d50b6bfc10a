"""OpenTelemetry traces over OTLP/HTTP, on when `OTEL_EXPORTER_OTLP_ENDPOINT` is set.

What is traced: every HTTP request (FastAPI, probes and /metrics left out),
every SQL statement (psycopg, which SQLAlchemy drives), every outgoing HTTP
call through requests (python-gitlab's GitLab calls, OpenShift and OIDC
look-ups), and each engine step (`engine_spans`). The standard OTEL_*
variables apply (OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES,
OTEL_EXPORTER_OTLP_HEADERS, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, sampling).

The libraries come with the `otel` extra and are imported only here, when
the variable is set. requests and psycopg are instrumented process-wide (the
only way those libraries can be), so `close` undoes it: a process that builds
several apps one after another (tests) gets each one's own provider.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from fastapi import FastAPI

from workqueue import __version__
from workqueue.observability.extras import missing_extra
from workqueue.queue.observer import EngineObserver

logger = logging.getLogger(__name__)

ENDPOINT = "OTEL_EXPORTER_OTLP_ENDPOINT"
TRACES_ENDPOINT = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
# Probes and scrapes every few seconds per replica would drown the real traces.
EXCLUDED_URLS = "healthz,readyz,metrics"


def traces_endpoint(environ: Mapping[str, str]) -> str | None:
    """Where spans go, following the OTLP exporter's own rules; None: tracing is off."""
    specific = environ.get(TRACES_ENDPOINT, "").strip()
    if specific:
        return specific
    general = environ.get(ENDPOINT, "").strip()
    if general:
        return general.rstrip("/") + "/v1/traces"
    return None


def start_tracing(environ: Mapping[str, str]) -> Tracing | None:
    endpoint = traces_endpoint(environ)
    if endpoint is None:
        return None
    variable = TRACES_ENDPOINT if environ.get(TRACES_ENDPOINT, "").strip() else ENDPOINT
    return Tracing(endpoint, variable)


class Tracing:
    """The tracer provider of one app, and the instrumentation that feeds it."""

    def __init__(self, endpoint: str, variable: str) -> None:
        try:
            # Imported here: the default install has no OpenTelemetry at all.
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import (  # noqa: PLC0415
                OTLPSpanExporter,
            )
            from opentelemetry.instrumentation.fastapi import (  # noqa: PLC0415
                FastAPIInstrumentor,
            )
            from opentelemetry.instrumentation.psycopg import (  # noqa: PLC0415
                PsycopgInstrumentor,
            )
            from opentelemetry.instrumentation.requests import (  # noqa: PLC0415
                RequestsInstrumentor,
            )
            from opentelemetry.sdk.resources import Resource  # noqa: PLC0415
            from opentelemetry.sdk.trace import TracerProvider  # noqa: PLC0415
            from opentelemetry.sdk.trace.export import BatchSpanProcessor  # noqa: PLC0415
        except ImportError as error:
            raise missing_extra(variable, "OpenTelemetry", "otel", error) from None
        # OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES are read by create(); the
        # name defaults to ours rather than the SDK's `unknown_service`.
        resource = Resource.create({"service.version": __version__})
        if str(resource.attributes.get("service.name", "")).startswith("unknown_service"):
            resource = resource.merge(Resource({"service.name": "workqueue-service"}))
        self.provider = TracerProvider(resource=resource)
        self.provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint)))
        self._fastapi = FastAPIInstrumentor
        self._global: list[Any] = [RequestsInstrumentor(), PsycopgInstrumentor()]
        for instrumentor in self._global:
            # Left alone if something else in the process instrumented it first.
            if not instrumentor.is_instrumented_by_opentelemetry:
                instrumentor.instrument(tracer_provider=self.provider)
        logger.info("tracing: spans go to %s", endpoint)

    def instrument(self, app: FastAPI) -> None:
        self._fastapi.instrument_app(
            app, tracer_provider=self.provider, excluded_urls=EXCLUDED_URLS
        )

    def engine_observer(self) -> EngineObserver:
        from workqueue.observability.engine_spans import StepSpans  # noqa: PLC0415 - needs otel

        return StepSpans(self.provider.get_tracer("workqueue.engine", __version__))

    def close(self) -> None:
        """Export what is buffered, then stop instrumenting requests and psycopg."""
        for instrumentor in self._global:
            if instrumentor.is_instrumented_by_opentelemetry:
                instrumentor.uninstrument()
        self.provider.shutdown()
