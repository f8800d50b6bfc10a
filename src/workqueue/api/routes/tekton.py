"""`POST /api/webhooks/tekton`: Tekton PipelineRun CloudEvents become signals.

The CloudEvents HTTP binding, binary or structured mode, is read by the
CloudEvents SDK. The sender proves itself before its body is read
(`AuthenticateFirst`): with a bearer token holding `report` on each run's
project, or, when it cannot set headers (Tekton's events controller), with the
secret of `signals.tekton.secret_env` in the URL's `token` parameter, which
reports on `signals.tekton.projects` and, for a run of a namespace, on
`signals.tekton.namespaces[it]`. The token is taken out of every request to a
webhook path before anything logs or traces its URL (`take_query_token`,
called by the app first), and compared in constant time.
"""

from __future__ import annotations

import hmac
import logging
import os
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal
from urllib.parse import parse_qsl, urlencode

from cloudevents.exceptions import GenericException
from cloudevents.http import from_http
from fastapi import APIRouter, HTTPException, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, ValidationError
from starlette.types import Scope

from workqueue.api.caller_state import Caller, remembered_caller
from workqueue.api.deps import RuntimeDep, require_on_project
from workqueue.api.middleware.asgi import route_path
from workqueue.api.routes.signals import invalid, store_signal
from workqueue.api.schemas import error_responses
from workqueue.signals.intake import SIGNAL_ITEM_TYPE, TooFarAheadError, run_signal
from workqueue.signals.signal import Signal
from workqueue.signals.tekton import (
    NotAPipelineRunError,
    RunReport,
    TektonConfig,
    event_key,
    event_time,
    run_reports,
)

logger = logging.getLogger(__name__)

TEKTON_PATH = "/api/webhooks/tekton"
WEBHOOK_PATHS = "/api/webhooks/"
# A PipelineRun with its status (child references, results) fits well within this.
MAX_BODY_BYTES = 2 * 1024 * 1024
# How much of the SDK's complaint a 422 repeats: it may quote the body.
_ERROR_CHARS = 200
# Names, not secrets:
TOKEN_PARAMETER = "token"  # noqa: S105
_TOKEN_KEY = "workqueue.tekton_token"  # noqa: S105
SECRET_REPORTER = "workqueue:tekton-secret"  # noqa: S105 - who reported, not a secret

router = APIRouter(tags=["external checks"])


def take_query_token(scope: Scope) -> None:
    """Move `?token=` of any request to a webhook path (any method, a trailing slash,
    the wrong receiver) into the request's state, out of its URL: the access log,
    traces and errors then never see it."""
    if not (route_path(scope).rstrip("/") + "/").startswith(WEBHOOK_PATHS):
        return
    query = scope.get("query_string", b"").decode("latin-1")
    if not query:
        return
    pairs = parse_qsl(query, keep_blank_values=True)
    tokens = [value for name, value in pairs if name == TOKEN_PARAMETER]
    if not tokens:
        return
    scope.setdefault("state", {})[_TOKEN_KEY] = tokens
    rest = [(name, value) for name, value in pairs if name != TOKEN_PARAMETER]
    scope["query_string"] = urlencode(rest).encode("latin-1")


@dataclass(frozen=True)
class TektonReceiver:
    """`signals.tekton` and its secret, read once at startup (`app.state.tekton`)."""

    config: TektonConfig
    secret: str | None

    @classmethod
    def from_config(cls, config: TektonConfig) -> TektonReceiver:
        if config.secret_env is None:
            return cls(config, None)
        secret = os.environ.get(config.secret_env, "")
        if len(secret) < 16:
            raise ValueError(
                f"signals.tekton.secret_env: {config.secret_env} must hold a secret of at "
                "least 16 characters"
            )
        return cls(config, secret)

    def secret_matches(self, tokens: list[str]) -> bool:
        if self.secret is None or len(tokens) != 1:
            return False
        return hmac.compare_digest(tokens[0].encode(), self.secret.encode())


def holds_events_secret(scope: Scope) -> bool:
    """Whether the request carries the events secret (`?token=`, moved into its state)."""
    receiver = getattr(scope["app"].state, "tekton", None)
    tokens = scope.get("state", {}).get(_TOKEN_KEY, [])
    return isinstance(receiver, TektonReceiver) and receiver.secret_matches(tokens)


class TektonAnswer(BaseModel):
    status: Literal["accepted", "duplicate", "ignored"]
    signals: int  # signals the event made (one per matching check)


@router.post(
    TEKTON_PATH,
    status_code=202,
    response_model=TektonAnswer,
    responses=error_responses(400, 401, 403, 413),
)
async def tekton_event(request: Request, runtime: RuntimeDep) -> TektonAnswer:
    """One PipelineRun CloudEvent: each configured check it matches is a signal."""
    receiver: TektonReceiver = request.app.state.tekton
    caller = _caller(request)
    body = await request.body()
    try:
        event = from_http(dict(request.headers), body)
    except (GenericException, ValueError) as error:
        raise invalid("body", f"not a CloudEvent: {str(error)[:_ERROR_CHARS]}") from None
    attributes = event.get_attributes()
    time = event_time(attributes.get("time"))
    try:
        reports = run_reports(
            str(attributes.get("type", "")), event.get_data(), time, receiver.config.checks
        )
    except NotAPipelineRunError:
        return TektonAnswer(status="ignored", signals=0)
    if not reports:
        return TektonAnswer(status="ignored", signals=0)
    now = datetime.now(UTC)
    signals = [_checked(report, now) for report in reports]
    for report, signal in zip(reports, signals, strict=True):
        _authorise(runtime, caller, receiver, signal.project, report.namespace)
    outcomes = []
    for signal in signals:
        recorded = await run_in_threadpool(
            store_signal,
            runtime,
            signal,
            source="tekton",
            reporter=SECRET_REPORTER if caller is None else caller.identity,
            key=event_key(attributes, signal.name),  # a resent event is a duplicate
        )
        outcomes.append(recorded.outcome.value)
    status = "duplicate" if all(o == "duplicate" for o in outcomes) else "accepted"
    return TektonAnswer(status=status, signals=len(signals))


def _caller(request: Request) -> Caller | None:
    """The bearer token's caller (proved by `AuthenticateFirst`); None for the secret,
    checked again here; 401 without either."""
    caller = remembered_caller(request.scope)
    if caller is not None:
        return caller
    if request.headers.get("authorization") is None and holds_events_secret(request.scope):
        return None
    raise HTTPException(
        401, "a bearer token or the events secret is needed", headers={"WWW-Authenticate": "Bearer"}
    )


def _authorise(
    runtime: RuntimeDep,
    caller: Caller | None,
    receiver: TektonReceiver,
    project: str,
    namespace: str | None,
) -> None:
    """A token: its `report` scope. The secret: `signals.tekton.projects`, or the projects
    of the run's namespace in `signals.tekton.namespaces`."""
    if caller is not None:
        require_on_project(runtime, caller, "report", SIGNAL_ITEM_TYPE, project)
    elif not receiver.config.secret_may_report(project, namespace):
        raise HTTPException(
            403,
            f"the events secret may not report on project {project} "
            f"for a run in namespace {namespace or '(none)'}",
        )


def _checked(report: RunReport, now: datetime) -> Signal:
    """The run's signal, held to the rules of `POST /api/signals` (422 naming the field)."""
    try:
        return run_signal(report, now)
    except ValidationError as error:
        problems = [
            {
                "loc": ("body", "pipelineRun", *problem["loc"]),
                "msg": problem["msg"],
                "type": problem["type"],
            }
            for problem in error.errors()
        ]
        raise RequestValidationError(problems) from None
    except TooFarAheadError as error:
        raise invalid("time", str(error)) from None
