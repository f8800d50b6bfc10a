"""What the service tells operators about itself, beyond the core Prometheus metrics.

- `composite`: several engine observers behind the one the engine accepts;
- `http_metrics`: request counts and durations by route and status (the
  webhook 401 rate comes from here);
- `backlog`: the age of the oldest item waiting for a worker;
- `tracing`: OpenTelemetry traces when `OTEL_EXPORTER_OTLP_ENDPOINT` is set
  (the `otel` extra), with one span per engine step (`engine_spans`);
- `error_reports`: Sentry when `SENTRY_DSN` is set (the `sentry` extra);
- `setup`: `Observability`, which `create_app` starts, wires in and closes.

The generic engine (`queue/`) knows none of this: it reports through
`EngineObserver`, and the optional libraries are imported only when their
variable is set.
"""

from workqueue.observability.setup import Observability, ObservabilityUnavailableError

__all__ = ["Observability", "ObservabilityUnavailableError"]
