"""Attack-review: the receiver's prebuilt 200 answers share one header list per status
between all requests, so a layer that adds a response header in place changes every
later answer. OpenTelemetry's ASGI middleware (what FastAPIInstrumentor installs when
tracing is configured) does exactly that when a response propagator is set
(`traceresponse`): the list grows by one header per webhook, for the process's life, and
each answer carries the trace ids of every earlier one. Real HTTP, real database."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from opentelemetry.instrumentation.asgi import OpenTelemetryMiddleware
from opentelemetry.instrumentation.propagators import (
    TraceResponsePropagator,
    get_global_response_propagator,
    set_global_response_propagator,
)
from opentelemetry.sdk.trace import TracerProvider

sys.path.insert(0, str(Path(__file__).parents[1] / "webhooks"))

from live_app import live_client
from webhook_support import OLD_SECRET, receiver_app

from workqueue.api.webhooks import route as webhooks


@pytest.fixture
def trace_responses() -> Iterator[None]:
    previous = get_global_response_propagator()
    set_global_response_propagator(TraceResponsePropagator())
    try:
        yield
    finally:
        set_global_response_propagator(previous)


def test_each_webhook_answer_carries_only_its_own_headers(database_url, simulator, trace_responses):
    app = receiver_app(database_url, simulator.url)
    app.add_middleware(OpenTelemetryMiddleware, tracer_provider=TracerProvider())
    with live_client(app) as client:
        answers = [
            client.post(
                webhooks.WEBHOOK_PATH,
                content=b'{"object_kind": "pipeline", "object_attributes": {"id": %d}}' % n,
                headers={"X-Gitlab-Token": OLD_SECRET},
            )
            for n in range(3)
        ]

    assert [answer.json() for answer in answers] == [{"status": "accepted"}] * 3
    # Fails: the nth answer carries n traceresponse headers (the shared list grew).
    assert [len(answer.headers.get_list("traceresponse")) for answer in answers] == [1, 1, 1]
