"""`POST /api/webhooks/gitlab`: GitLab webhooks stored for the items they concern.

Rules (see docs API.md, "Webhooks" and "Trust boundary, round 2"):

* `X-Gitlab-Token` must equal one of the configured secrets
  (`api.webhook_secrets`: `webhooks.secrets[]` of the config file, each for
  its projects, and `WORKQUEUE_SERVICE_GITLAB_WEBHOOK_SECRET`, comma-separated
  for rotation, for every project), compared in constant time; otherwise 401
  before the body is read, and nothing is stored. With no secret configured
  every delivery is refused (fail closed).
* The body must be a JSON object in strict JSON (`api.strict_json`: UTF-8,
  no NaN/Infinity, finite numbers, bounded nesting); 400 otherwise. It is at
  most `MAX_BODY_BYTES` (1 MiB, 413 above), read by the body reader.
* The event type is the payload's `object_kind` (`merge_request`, `pipeline`,
  `build` for Job Hooks, `note`, `push`, ...), else derived from the
  `X-Gitlab-Event` header. Only kinds GitLab sends (`gitlab.hooks.GITLAB_OBJECT_KINDS`)
  are taken: the kinds item types store for themselves (`trunk.read_head`)
  are unhandled from outside ("ignored").
* The project the body names must be covered by the secrets the token equals
  (401 otherwise, the same answer as a wrong token), and its id and path must
  name one project as GitLab knows them (`api.webhook_projects`; 422 on
  `["body", "project"]`, or `["body", "project_id"]` when the body's two ids
  differ). A project id that is no JSON integer is a 422 on that field (JSONB
  would store `1e2` as the id `100` the check never saw). That is the one
  GitLab call a request may cost, cached, and only once the token matched,
  paid from the matched secret's budget (`api.webhook_lookup_budget`); GitLab
  unable to answer, the budget spent or the look-up wait full is a 503 with
  `Retry-After`.
* The delivery key is `Idempotency-Key` (stable across GitLab's retries and
  "Resend"), else `X-Gitlab-Event-UUID`, else `sha256:` + the SHA-256 of the
  raw body (so byte-identical redeliveries from old GitLab versions still
  de-duplicate). A repeated key answers "duplicate" and stores nothing.
* The answer comes once the delivery is stored (`queue.intake`: its key and
  its body, committed); which items it concerns is resolved behind it, in
  batches, by the intake resolver. No resolver or creator runs in the request.
* 200 `{"status": "accepted" | "duplicate" | "ignored"}`: "ignored" for a kind
  no handled type uses (answered before any SQL or GitLab call); a stored
  delivery is "accepted" even when it turns out to concern no item, and
  irrelevant events answer 2xx because GitLab disables hooks that keep failing.

The application provides the secrets as `app.state.webhook_secrets`
(`WebhookSecrets.from_settings(settings, config.webhooks)`), the project
directory as `app.state.webhook_projects` and the runtime as
`app.state.runtime`.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from fastapi import APIRouter, HTTPException, Request, Response
from pydantic import BaseModel
from sqlalchemy.orm import Session, sessionmaker
from starlette.requests import ClientDisconnect
from starlette.types import ASGIApp, Receive, Scope, Send

from workqueue.api.deps import Runtime
from workqueue.api.middleware.asgi import has_pending_body, header, route_path, send_json
from workqueue.api.middleware.strict_json import InvalidJSONError, parse_strict_json
from workqueue.api.middleware.unavailable import RETRY_AFTER_SECONDS, UNAVAILABLE_DETAIL
from workqueue.api.schemas import error_responses
from workqueue.api.webhooks.batcher import IntakeBatcher
from workqueue.api.webhooks.secrets import ProjectScope, WebhookSecrets
from workqueue.db.errors import is_database_unavailable, is_statement_timeout
from workqueue.gitlab.webhook_bodies import (
    HookProject,
    gitlab_event_type,
    hook_project,
    malformed_project_ids,
    project_id_conflict,
)
from workqueue.observability.service_metrics import ServiceMetrics
from workqueue.queue.intake.deliveries import new_delivery
from workqueue.queue.intake.pending_events import IngestStatus
from workqueue.receivers.lookup_budget import LookupRefused
from workqueue.receivers.projects import ProjectDirectory, ProjectLookupUnavailable

logger = logging.getLogger(__name__)

WEBHOOK_PATH = "/api/webhooks/gitlab"
WEBHOOK_SOURCE = "webhook"  # received_deliveries.source
MAX_BODY_BYTES = 1024 * 1024  # GitLab's largest hooks (pipelines with many jobs) fit
STATE_KEY = "webhook_secrets"  # app.state attribute holding the WebhookSecrets
PROJECTS_KEY = "webhook_projects"  # app.state attribute holding the ProjectDirectory
_BATCHER_KEY = "webhook_intake_batcher"  # app.state attribute holding the IntakeBatcher
_STORED_COUNTER_KEY = "webhook_stored_counter"  # (ServiceMetrics, its webhook child)

_UNAUTHORIZED = "missing or invalid X-Gitlab-Token"
_LOOKUP_UNAVAILABLE = "GitLab is unavailable: the delivery's project could not be checked"
_LOOKUP_REFUSED = "too many project look-ups: the delivery's project could not be checked now"


class WebhookAnswer(BaseModel):
    """The documented answer; built directly (`_answer`) to keep the hot path lean."""

    status: Literal["accepted", "duplicate", "ignored"]


_ANSWER_BODIES: dict[str, bytes] = {
    status: json.dumps({"status": status}, separators=(",", ":")).encode()
    for status in ("accepted", "duplicate", "ignored")
}


def _answer(status: IngestStatus) -> Response:
    return Response(_ANSWER_BODIES[status], media_type="application/json")


router = APIRouter(tags=["webhooks"])


@router.post(
    WEBHOOK_PATH,
    response_model=WebhookAnswer,
    responses={
        **error_responses(
            400,
            401,
            408,
            413,
            503,
            descriptions={
                400: "The body is not a JSON object (strict JSON)",
                401: "Missing or wrong X-Gitlab-Token; nothing was stored",
                413: "The body is over 1 MiB",
                503: "The database is unavailable, or the project could not be checked now "
                "(GitLab unavailable, or too many look-ups); nothing was stored",
            },
        ),
        422: {
            # FastAPI's own validation-error schema, which the other routes' 422s use.
            "content": {
                "application/json": {"schema": {"$ref": "#/components/schemas/HTTPValidationError"}}
            },
            "description": "A project id is no JSON integer, or the body's project id and "
            "path name different projects; nothing was stored",
        },
    },
)
async def receive_gitlab_webhook(request: Request) -> Response:
    """Store a GitLab webhook delivery for the active items it concerns."""
    # Served by `WebhookReceiver` in the service; this route documents it and
    # serves apps built without that middleware.
    return await handle_webhook(request)


async def handle_webhook(request: Request) -> Response:
    """The receiver: authenticate, parse, store, answer (see the module doc)."""
    client = request.client.host if request.client else None
    status = await _receive(request.app, request.headers, client, request.body)
    return _answer(status)


async def _receive(
    app: Any,
    headers: Mapping[str, str],
    client: str | None,
    read_body: Callable[[], Awaitable[bytes]],
) -> IngestStatus:
    """Authenticate, parse and store one delivery; HTTPException for the error answers.

    Shared by the route (Starlette's `Headers`) and `WebhookReceiver` (the few
    headers it reads, straight from the scope). `headers` keys are lower case.
    """
    scope = _app_secrets(app).scope(headers.get("x-gitlab-token"))
    if scope is None:
        logger.warning(
            "webhook refused: %s X-Gitlab-Token from %s",
            "wrong" if "x-gitlab-token" in headers else "no",
            client or "unknown",
        )
        raise HTTPException(status_code=401, detail=_UNAUTHORIZED)
    raw = await read_body()
    body = _json_object(raw)
    event_type = gitlab_event_type(body, headers.get("x-gitlab-event"))
    if event_type is None:
        return "ignored"
    runtime: Runtime = app.state.runtime
    if not runtime.registry.routes_event(event_type):
        return "ignored"  # a kind no handled type uses: no SQL, no GitLab call
    await _check_project(_app_projects(app), scope, body, client)
    delivery = new_delivery(
        source=WEBHOOK_SOURCE,
        delivery_key=delivery_key(headers, raw),
        event_type=event_type,
        body=body,
        raw_body=raw,
    )
    try:
        status = await intake_batcher(app, runtime.sessions).store(delivery)
    except Exception as error:
        if is_database_unavailable(error) or is_statement_timeout(error):
            logger.warning("webhook not stored, database unavailable or too slow: %s", error)
            raise HTTPException(
                status_code=503,
                detail=UNAVAILABLE_DETAIL,
                headers={"Retry-After": RETRY_AFTER_SECONDS},
            ) from None
        raise
    if status == "accepted":
        runtime.manager.intake.stored_here()
        _count_stored(app)
    return status


async def _check_project(
    projects: ProjectDirectory, scope: ProjectScope, body: Mapping[str, Any], client: str | None
) -> None:
    """The body's project must be one the token's secrets cover (401, as for a wrong
    token: the answer does not tell which projects a secret covers), and its id and path
    must name that one project on GitLab (422). Nothing is stored otherwise."""
    malformed = malformed_project_ids(body)
    if malformed:
        raise _malformed_id(malformed[0])
    if project_id_conflict(body):
        raise _disagreement("project_id", "project.id and project_id are different projects")
    project = hook_project(body)
    try:
        if not await _covered(projects, scope, project):
            logger.warning(
                "webhook refused: the X-Gitlab-Token from %s is not one for project %s",
                client or "unknown",
                project.path or project.id or "(none named)",
            )
            raise HTTPException(status_code=401, detail=_UNAUTHORIZED)
        if (
            project.id is not None
            and project.path is not None
            and not await projects.same_project_soon(project.id, project.path, payer=scope.payer)
        ):
            raise _disagreement(
                "project",
                f"project.id {project.id} and project.path_with_namespace "
                f"{project.path} are different projects on GitLab",
            )
    except LookupRefused as error:
        logger.warning(
            "webhook not stored, its project look-up refused (%s, payer %s)", error, scope.payer
        )
        raise HTTPException(
            status_code=503,
            detail=_LOOKUP_REFUSED,
            headers={"Retry-After": str(error.retry_after_seconds)},
        ) from None
    except ProjectLookupUnavailable as error:
        logger.warning("webhook not stored, GitLab could not say which project it is: %s", error)
        raise HTTPException(
            status_code=503,
            detail=_LOOKUP_UNAVAILABLE,
            headers={"Retry-After": RETRY_AFTER_SECONDS},
        ) from None


async def _covered(projects: ProjectDirectory, scope: ProjectScope, project: HookProject) -> bool:
    """Whether the scope covers the project the body names: by its path, else by the
    path GitLab gives its id. A body naming no project needs a scope of every project."""
    if scope.every_project:
        return True
    if project.path is not None:
        return scope.covers(project.path)
    if project.id is None:
        return False
    path = await projects.path_of_soon(project.id, payer=scope.payer)
    return path is not None and scope.covers(path)


def _malformed_id(where: tuple[str, ...]) -> HTTPException:
    message = "a project id is a positive JSON integer (not 1e2, 100.0 or a string)"
    logger.warning("webhook refused: %s is not a project id", ".".join(where))
    return HTTPException(
        status_code=422,
        detail=[{"loc": ["body", *where], "msg": message, "type": "int_type"}],
    )


def _disagreement(field: str, message: str) -> HTTPException:
    logger.warning("webhook refused: %s", message)
    return HTTPException(
        status_code=422,
        detail=[{"loc": ["body", field], "msg": message, "type": "project_mismatch"}],
    )


def _json_object(raw: bytes) -> dict[str, Any]:
    try:
        body = parse_strict_json(raw)
    except InvalidJSONError:
        body = None
    if not isinstance(body, dict):
        raise HTTPException(status_code=400, detail="the body must be a JSON object")
    return body


def intake_batcher(app: Any, sessions: sessionmaker[Session]) -> IntakeBatcher:
    """The application's batcher: concurrent deliveries share one transaction, and at
    most `MAX_IN_FLIGHT` are open, so a burst of webhooks takes neither the
    connections the processing workers need nor a thread each."""
    batcher = getattr(app.state, _BATCHER_KEY, None)
    if not isinstance(batcher, IntakeBatcher):
        batcher = IntakeBatcher(sessions)
        setattr(app.state, _BATCHER_KEY, batcher)
    return batcher


@dataclass(frozen=True)
class _RouteName:
    path: str


_WEBHOOK_ROUTE = _RouteName(WEBHOOK_PATH)


class WebhookReceiver:
    """Serves `POST /api/webhooks/gitlab` straight from ASGI, inside the body reader.

    The route's whole work is one statement; FastAPI's routing, dependency
    resolution and response handling would cost more than that. Errors answer
    as the route would (`{"detail": ...}`). Per request it reads the four
    headers it needs from the scope and sends prebuilt answers: no `Request`,
    `Headers` or `Response` objects.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] != "http"
            or scope["method"] != "POST"
            or route_path(scope) != WEBHOOK_PATH
        ):
            await self.app(scope, receive, send)
            return
        scope["route"] = _WEBHOOK_ROUTE  # what routing would have set (metrics label by it)
        client = scope.get("client")
        try:
            status = await _receive(
                scope["app"],
                _read_headers(scope),
                client[0] if client else None,
                lambda: _read_body(receive),
            )
        except HTTPException as error:
            extra = [
                (name.lower().encode("latin-1"), value.encode("latin-1"))
                for name, value in (error.headers or {}).items()
            ]
            await send_json(send, error.status_code, {"detail": error.detail}, headers=extra)
            return
        # A copy: a middleware may append to the list it is given (OpenTelemetry's
        # `traceresponse`), and every later answer would carry it.
        headers = list(_ANSWER_HEADERS[status])
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": _ANSWER_BODIES[status]})


# The headers the receiver reads (lower case, as ASGI names them).
_READ_HEADERS = frozenset(
    {b"x-gitlab-token", b"x-gitlab-event", b"idempotency-key", b"x-gitlab-event-uuid"}
)
_ANSWER_HEADERS: dict[str, tuple[tuple[bytes, bytes], ...]] = {
    status: (
        (b"content-length", str(len(body)).encode()),
        (b"content-type", b"application/json"),
    )
    for status, body in _ANSWER_BODIES.items()
}


def _read_headers(scope: Scope) -> dict[str, str]:
    """The first value of each header the receiver reads, decoded as Starlette does."""
    found: dict[str, str] = {}
    for key, value in scope["headers"]:
        if key in _READ_HEADERS:
            found.setdefault(bytes(key).decode("latin-1"), bytes(value).decode("latin-1"))
    return found


async def _read_body(receive: Receive) -> bytes:
    """The whole body (the body reader replays it as one message)."""
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientDisconnect
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return chunks[0] if len(chunks) == 1 else b"".join(chunks)


class WebhookTokenFirst:
    """401 for a delivery without a valid `X-Gitlab-Token`, before its body is read.

    ASGI middleware outside the body reader: an unauthenticated sender cannot
    make the service buffer (up to 1 MiB) or parse anything. The route checks
    the token again, so it is also safe without this middleware.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] != "http"
            or scope["method"] != "POST"
            or route_path(scope) != WEBHOOK_PATH
        ):
            await self.app(scope, receive, send)
            return
        secrets = getattr(scope["app"].state, STATE_KEY, None)
        token = header(scope, b"x-gitlab-token")
        if isinstance(secrets, WebhookSecrets) and secrets.matches(token):
            await self.app(scope, receive, send)
            return
        logger.warning(
            "webhook refused before its body: %s X-Gitlab-Token",
            "wrong" if token is not None else "no",
        )
        await send_json(send, 401, {"detail": _UNAUTHORIZED}, close=has_pending_body(scope))


def webhook_secrets(request: Request) -> WebhookSecrets:
    return _app_secrets(request.app)


def _app_secrets(app: Any) -> WebhookSecrets:
    secrets = getattr(app.state, STATE_KEY, None)
    if isinstance(secrets, WebhookSecrets):
        return secrets
    logger.error("app.state.%s is not set: refusing webhooks", STATE_KEY)
    return WebhookSecrets(())


def _app_projects(app: Any) -> ProjectDirectory:
    projects = getattr(app.state, PROJECTS_KEY, None)
    if isinstance(projects, ProjectDirectory):
        return projects
    logger.error("app.state.%s is not set: no project can be checked", PROJECTS_KEY)
    return ProjectDirectory(())  # asks no GitLab: every check is "unavailable" (503)


def delivery_key(headers: Mapping[str, str], raw_body: bytes) -> str:
    """`Idempotency-Key`, else `X-Gitlab-Event-UUID`, else a hash of the raw body."""
    for name in ("idempotency-key", "x-gitlab-event-uuid"):
        value = (headers.get(name) or "").strip()
        if value:
            return value
    return "sha256:" + hashlib.sha256(raw_body).hexdigest()


def _count_stored(app: Any) -> None:
    # The labelled child is kept beside the metrics it belongs to: `labels()`
    # takes a lock and builds a key on every call.
    counted = getattr(app.state, _STORED_COUNTER_KEY, None)
    metrics = getattr(app.state, "metrics", None)
    if counted is None or counted[0] is not metrics:
        if not isinstance(metrics, ServiceMetrics):
            return
        counted = (metrics, metrics.events_received.labels(WEBHOOK_SOURCE))
        setattr(app.state, _STORED_COUNTER_KEY, counted)
    counted[1].inc()
