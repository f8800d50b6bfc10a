"""Step spans: one per engine step, closed however the step ends, parent of its calls."""

from __future__ import annotations

import threading
import uuid

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode, get_current_span

from workqueue.observability.engine_spans import ACTION, ITEM_ID, ITEM_TYPE, OUTCOME, StepSpans


@pytest.fixture
def recorded():
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield StepSpans(provider.get_tracer("test")), exporter, provider
    provider.shutdown()


def test_a_successful_step_is_one_span_with_the_item_and_the_outcome(recorded):
    steps, exporter, _ = recorded
    item_id = uuid.uuid4()
    steps.action_started("mr", "ensure_mr", item_id)
    steps.action_finished("mr", "ensure_mr", "succeeded", 0.1)
    [span] = exporter.get_finished_spans()
    assert span.name == "mr ensure_mr"
    assert dict(span.attributes) == {
        ITEM_ID: str(item_id),
        ITEM_TYPE: "mr",
        ACTION: "ensure_mr",
        OUTCOME: "succeeded",
    }
    assert span.status.status_code is StatusCode.UNSET
    assert not get_current_span().get_span_context().is_valid  # context restored


@pytest.mark.parametrize("outcome", ["failed", "permanent_failure"])
def test_a_failed_step_is_an_error(recorded, outcome):
    steps, exporter, _ = recorded
    steps.action_started("mr", "reconcile_mr", uuid.uuid4())
    steps.action_finished("mr", "reconcile_mr", outcome, 0.1)
    [span] = exporter.get_finished_spans()
    assert span.status.status_code is StatusCode.ERROR
    assert span.status.description == outcome


def test_calls_made_during_the_step_are_its_children(recorded):
    steps, exporter, provider = recorded
    steps.action_started("mr", "ensure_mr", uuid.uuid4())
    with provider.get_tracer("client").start_as_current_span("POST"):
        pass
    steps.action_finished("mr", "ensure_mr", "succeeded", 0.1)
    call, step = exporter.get_finished_spans()
    assert call.parent is not None
    assert call.parent.span_id == step.context.span_id


def test_a_lost_lease_closes_the_span_and_a_late_finish_changes_nothing(recorded):
    steps, exporter, _ = recorded
    steps.action_started("mr", "ensure_mr", uuid.uuid4())
    steps.lease_lost("mr")
    steps.action_finished("mr", "ensure_mr", "succeeded", 0.1)  # no open span: ignored
    [span] = exporter.get_finished_spans()
    assert span.attributes[OUTCOME] == "lease lost"
    assert span.status.status_code is StatusCode.ERROR
    assert not get_current_span().get_span_context().is_valid


def test_a_step_that_ended_unreported_is_closed_by_the_next_start(recorded):
    steps, exporter, _ = recorded
    steps.action_started("mr", "ensure_mr", uuid.uuid4())
    steps.action_started("mr", "reconcile_mr", uuid.uuid4())  # e.g. the database went away
    steps.action_finished("mr", "reconcile_mr", "succeeded", 0.1)
    abandoned, finished = exporter.get_finished_spans()
    assert abandoned.name == "mr ensure_mr"
    assert abandoned.attributes[OUTCOME] == "ended without an outcome"
    assert finished.name == "mr reconcile_mr"
    assert finished.parent is None  # not a child of the abandoned one


def test_steps_on_different_worker_threads_do_not_mix(recorded):
    steps, exporter, _ = recorded
    started = threading.Barrier(2)

    def worker(action: str) -> None:
        steps.action_started("mr", action, uuid.uuid4())
        started.wait(5)  # both steps open at once
        steps.action_finished("mr", action, "succeeded", 0.1)

    threads = [threading.Thread(target=worker, args=(name,)) for name in ("a", "b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(5)
    spans = exporter.get_finished_spans()
    assert sorted(span.name for span in spans) == ["mr a", "mr b"]
    assert all(span.parent is None for span in spans)
    assert all(span.attributes[OUTCOME] == "succeeded" for span in spans)
