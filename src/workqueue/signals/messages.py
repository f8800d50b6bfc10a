"""Signals in a queue message: a report (the body of `POST /api/signals`) or a
PipelineRun CloudEvent in structured mode (what Tekton's events controller
posts, relayed). Anything else is not a signal message (None).

The CloudEvent is read by the CloudEvents SDK; both shapes are held to the
rules of `signals.intake`, so a message passes or fails as the same report
sent over HTTP would.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from cloudevents.exceptions import GenericException
from cloudevents.http import from_dict
from pydantic import ValidationError

from workqueue.signals.intake import TooFarAheadError, report_signal, run_signal
from workqueue.signals.signal import Signal
from workqueue.signals.tekton import (
    NotAPipelineRunError,
    TektonCheck,
    event_key,
    event_time,
    run_reports,
)

REPORT_KEYS = frozenset({"project", "sha", "name", "status"})


class BadSignalMessageError(ValueError):
    """Shaped like a signal message but not a valid one: it can never be stored."""


@dataclass(frozen=True, slots=True)
class QueuedSignal:
    signal: Signal
    key: str | None  # what names its delivery; None: the message's own key
    namespace: str | None  # a PipelineRun's namespace; None for a report


@dataclass(frozen=True, slots=True)
class MessageSignals:
    """The signals of one message."""

    signals: list[QueuedSignal]


def message_signals(
    body: Mapping[str, Any], tekton_checks: list[TektonCheck], now: datetime
) -> MessageSignals | None:
    """The signals `body` holds; None when it is no signal message (a GitLab event);
    raises BadSignalMessageError."""
    if "object_kind" in body:
        return None
    if "specversion" in body:
        return _cloud_event(body, tekton_checks, now)
    if body.keys() >= REPORT_KEYS:
        try:
            return MessageSignals([QueuedSignal(report_signal(body, now), None, None)])
        except (ValidationError, TooFarAheadError) as error:
            raise BadSignalMessageError(f"not a valid report: {_first_problem(error)}") from None
    return None


def _cloud_event(
    body: Mapping[str, Any], checks: list[TektonCheck], now: datetime
) -> MessageSignals:
    try:
        event = from_dict(body)
    except (GenericException, ValueError, TypeError) as error:
        raise BadSignalMessageError(f"not a CloudEvent: {error}") from None
    attributes = event.get_attributes()
    time = event_time(attributes.get("time"))
    try:
        reports = run_reports(str(attributes.get("type", "")), event.get_data(), time, checks)
    except NotAPipelineRunError:
        return MessageSignals([])  # another event: nothing to report
    found = []
    for report in reports:
        try:
            signal = run_signal(report, now)
        except (ValidationError, TooFarAheadError) as error:
            raise BadSignalMessageError(f"PipelineRun event: {_first_problem(error)}") from None
        found.append(QueuedSignal(signal, event_key(attributes, signal.name), report.namespace))
    return MessageSignals(found)


def _first_problem(error: Exception) -> str:
    if isinstance(error, ValidationError):
        problem = error.errors()[0]
        return f"{'.'.join(str(part) for part in problem['loc'])}: {problem['msg']}"
    return str(error)
