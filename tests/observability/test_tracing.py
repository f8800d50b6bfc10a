"""OpenTelemetry: spans of a real app and engine reach a real OTLP/HTTP receiver.

The app is built by `create_app` on a test database with the GitLab
simulator behind it; OTEL_EXPORTER_OTLP_ENDPOINT points at an in-process
receiver that decodes the protobuf export requests the SDK sends.
"""

from __future__ import annotations

import sys

import pytest
from api_harness import build_client
from harness import wait_until
from mr_harness import PROJECT
from opentelemetry.instrumentation.psycopg import PsycopgInstrumentor
from opentelemetry.instrumentation.requests import RequestsInstrumentor
from otlp_receiver import ReceivedSpan, otlp_receiver

from workqueue.observability import Observability, ObservabilityUnavailableError
from workqueue.observability.engine_spans import ITEM_ID, ITEM_TYPE, OUTCOME
from workqueue.observability.tracing import traces_endpoint
from workqueue.settings import Settings

SERVER, CLIENT, INTERNAL = 2, 3, 1  # OTLP span kinds
SUBMIT = {
    "project": PROJECT,
    "source_branch": "workqueue/traced",
    "title": "Traced change",
    "commit_message": "Traced change",
    "file_actions": [{"action": "update", "file_path": "kernel.spec", "content": "Version: 3\n"}],
}


@pytest.fixture
def receiver(monkeypatch):
    with otlp_receiver() as receiver:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.url)
        monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "100")  # export every 100 ms
        monkeypatch.setenv("OTEL_SERVICE_NAME", "workqueue-under-test")
        yield receiver


def _is_database_span(span: ReceivedSpan) -> bool:
    return "postgresql" in (span.attributes.get("db.system"), span.attributes.get("db.system.name"))


def test_request_engine_step_gitlab_call_and_sql_are_traced(receiver, database_url, simulator):
    with build_client(database_url, simulator) as client:
        assert client.get("/healthz").status_code == 200
        created = client.post("/api/work-items/mr", json=SUBMIT)
        assert created.status_code == 201, created.text
        item_id = created.json()["id"]

        request = receiver.wait_for(
            lambda span: span.kind == SERVER and span.name == "POST /api/work-items/mr"
        )
        assert request.resource["service.name"] == "workqueue-under-test"
        assert request.resource["service.version"]

        step = receiver.wait_for(
            lambda span: span.name == "mr ensure_mr" and span.attributes.get(ITEM_ID) == item_id
        )
        assert step.kind == INTERNAL
        assert step.attributes[ITEM_TYPE] == "mr"
        assert step.attributes[OUTCOME] == "succeeded"
        assert step.parent_span_id == b""  # a step starts its own trace

        # The step's GitLab calls (python-gitlab over requests) are its children…
        gitlab_call = receiver.wait_for(
            lambda span: (
                span.kind == CLIENT
                and span.parent_span_id == step.span_id
                and not _is_database_span(span)
            )
        )
        assert gitlab_call.trace_id == step.trace_id
        url = gitlab_call.attributes.get("url.full") or gitlab_call.attributes.get("http.url")
        assert str(url).startswith(simulator.url), gitlab_call
        # …and so is its SQL (psycopg under SQLAlchemy).
        receiver.wait_for(lambda span: span.trace_id == step.trace_id and _is_database_span(span))
        # The request's own SQL belongs to the request's trace.
        receiver.wait_for(
            lambda span: span.trace_id == request.trace_id and _is_database_span(span)
        )
        wait_until(lambda: client.get(f"/api/work-items/{item_id}").json()["details"]["mr_iid"])
    assert not [span for span in receiver.spans if span.name == "GET /healthz"]
    # Shutdown undid the process-wide instrumentation.
    assert not RequestsInstrumentor().is_instrumented_by_opentelemetry
    assert not PsycopgInstrumentor().is_instrumented_by_opentelemetry


def test_without_the_variable_nothing_is_traced(database_url, simulator, monkeypatch):
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", raising=False)
    with build_client(database_url, simulator) as client:
        assert client.get("/api/work-items").status_code == 200
        assert not RequestsInstrumentor().is_instrumented_by_opentelemetry


@pytest.mark.parametrize(
    ("environ", "endpoint"),
    [
        ({}, None),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": " "}, None),
        (
            {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318/"},
            "http://collector:4318/v1/traces",
        ),
        (
            {
                "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318",
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://traces:4318/custom",
            },
            "http://traces:4318/custom",
        ),
    ],
)
def test_endpoint_follows_the_exporter_rules(environ, endpoint):
    assert traces_endpoint(environ) == endpoint


def test_a_missing_extra_is_one_clear_error(monkeypatch):
    # None in sys.modules makes the import fail, as when the extra is not installed.
    monkeypatch.setitem(sys.modules, "opentelemetry.sdk.trace", None)
    with pytest.raises(ObservabilityUnavailableError) as raised:
        Observability.start(Settings(), {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"})
    message = str(raised.value)
    assert message.startswith(
        "OTEL_EXPORTER_OTLP_ENDPOINT is set but OpenTelemetry is not installed "
        "(pip install 'workqueue-service[otel]')"
    )
    assert isinstance(raised.value, RuntimeError)  # serve turns it into a startup error
