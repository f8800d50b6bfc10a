"""One span per engine step, named `<item type> <action>`, with the item id as an attribute.

The engine reports a step's start and its end (`action_finished`, after the
step's commit) from the worker thread that runs it, so the span is made the
thread's current span in between: the step's GitLab calls (requests) and
SQL (psycopg) become its children. A step can also end without a report
(its lease was lost, the database went away); `lease_lost` and the next
start close such a span instead of leaking it.
"""

from __future__ import annotations

import threading
import uuid
from contextvars import Token

from opentelemetry import context, trace
from opentelemetry.context import Context
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, Tracer
from typing_extensions import override

from workqueue.queue.observer import EngineObserver

ITEM_ID = "workqueue.item.id"
ITEM_TYPE = "workqueue.item.type"
ACTION = "workqueue.action"
OUTCOME = "workqueue.outcome"


class StepSpans(EngineObserver):
    def __init__(self, tracer: Tracer) -> None:
        self._tracer = tracer
        self._open = threading.local()

    @override
    def action_started(self, item_type: str, action: str, item_id: uuid.UUID) -> None:
        self._close("ended without an outcome")
        span = self._tracer.start_span(
            f"{item_type} {action}",
            kind=SpanKind.INTERNAL,
            attributes={ITEM_ID: str(item_id), ITEM_TYPE: item_type, ACTION: action},
        )
        token = context.attach(trace.set_span_in_context(span))
        self._open.step = (span, token)

    @override
    def action_finished(self, item_type: str, action: str, outcome: str, seconds: float) -> None:
        span = self._take()
        if span is None:
            return
        span.set_attribute(OUTCOME, outcome)
        if outcome != "succeeded":
            span.set_status(Status(StatusCode.ERROR, outcome))
        span.end()

    @override
    def lease_lost(self, item_type: str) -> None:
        self._close("lease lost")

    def _close(self, reason: str) -> None:
        span = self._take()
        if span is not None:
            span.set_attribute(OUTCOME, reason)
            span.set_status(Status(StatusCode.ERROR, reason))
            span.end()

    def _take(self) -> Span | None:
        step: tuple[Span, Token[Context]] | None = getattr(self._open, "step", None)
        if step is None:
            return None
        self._open.step = None
        span, token = step
        context.detach(token)
        return span
