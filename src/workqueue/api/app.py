"""Application factory: HTTP around the runtime; everything is built from the settings,
nothing at import time."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy.engine import URL
from starlette.applications import Starlette
from starlette.middleware.errors import ServerErrorMiddleware
from starlette.types import ASGIApp, Receive, Scope, Send

from workqueue import __version__
from workqueue.api.deps import Gatekeeper, Runtime
from workqueue.api.gatekeeper import build_gatekeeper
from workqueue.api.loop_lag import LoopLag
from workqueue.api.middleware.answers import AnswerRules
from workqueue.api.middleware.authentication import (
    API_PREFIX,
    FAILED_AUTHENTICATIONS_KEY,
    AuthenticateFirst,
    OneOfEachCredential,
)
from workqueue.api.middleware.failed_authentications import FailedAuthentications
from workqueue.api.middleware.limits import (
    DEFAULT_BODY_TIMEOUT_SECONDS,
    DEFAULT_MAX_BODY_BYTES,
    BodyReader,
    body_limit,
)
from workqueue.api.middleware.strict_json import StrictJSONBodies
from workqueue.api.middleware.unavailable import answer_database_outages
from workqueue.api.middleware.validation_errors import validation_error_answer
from workqueue.api.routes import health, item_history, metrics, signals, tekton, work_items
from workqueue.api.routes.attention import router as attention_router
from workqueue.api.routes.docs_pages import mount_api_docs
from workqueue.api.routes.tekton import TektonReceiver
from workqueue.api.webhooks import route as webhooks
from workqueue.api.webhooks.batcher import MAX_IN_FLIGHT, STORE_TIMEOUT_SECONDS, IntakeBatcher
from workqueue.api.webhooks.secrets import WebhookSecrets
from workqueue.config import ServiceConfig
from workqueue.db.engine import (
    build_intake_engine,
    build_sessions,
)
from workqueue.gitlab.errors import GitLabError
from workqueue.observability.http_metrics import HTTPMetrics
from workqueue.observability.service_metrics import METRICS_CACHE_SECONDS
from workqueue.queue.registry import TypeRegistry
from workqueue.runtime import ServiceRuntime
from workqueue.settings import Settings
from workqueue.types.catalog import catalog
from workqueue.types.plugin import InstallContext
from workqueue.ui.browser_guard import DashboardHeaders
from workqueue.ui.mount import mount_dashboard

logger = logging.getLogger(__name__)

# Routes under /api/ that authenticate on their own (see api/middleware/authentication.py).
AUTHENTICATES_ITSELF = frozenset({("POST", webhooks.WEBHOOK_PATH), ("GET", "/api/work-items/me")})
# Routes that take another credential instead of a bearer token (checked before the body).
ALTERNATIVE_CREDENTIALS = {tekton.TEKTON_PATH: tekton.holds_events_secret}


def _answers_behind(loop_lag: LoopLag, batcher: IntakeBatcher) -> Callable[[], float]:
    """How far behind the answers are, for the workers to give way to (queue.give_way):
    the event loop wakes late, or a webhook transaction waits for the interpreter."""
    return lambda: max(loop_lag(), batcher.behind())


def create_app(
    settings: Settings,
    config: ServiceConfig,
    *,
    database_url: URL | None = None,
    process_items: bool = True,
    type_context: InstallContext | None = None,
    gatekeeper: Gatekeeper | None = None,
    max_body_bytes: int | None = None,
    body_timeout_seconds: float = DEFAULT_BODY_TIMEOUT_SECONDS,
    metrics_cache_seconds: float = METRICS_CACHE_SECONDS,
) -> FastAPI:
    """Build the service: its runtime (`workqueue.runtime`), and HTTP around it.

    `database_url` overrides DATABASE_URL (the embedded cluster's);
    `type_context` and `gatekeeper` replace what the settings would build (tests);
    a request body must arrive within `body_timeout_seconds` (408); scrape-time
    gauges that query the database are cached for `metrics_cache_seconds`."""
    runtime = ServiceRuntime(
        settings,
        config,
        database_url=database_url,
        process_items=process_items,
        type_context=type_context,
        metrics_cache_seconds=metrics_cache_seconds,
    )
    registry, service_metrics, probe_engine = (
        runtime.registry,
        runtime.metrics,
        runtime.probe_engine,
    )
    # Webhook deliveries are stored on connections of their own (IntakeBatcher).
    intake_engine = build_intake_engine(
        runtime.url, connections=MAX_IN_FLIGHT, statement_timeout_seconds=STORE_TIMEOUT_SECONDS
    )
    gate = gatekeeper or build_gatekeeper(settings, config)
    if max_body_bytes is None:
        # Default: what the largest allowed submission needs, at least 16 MiB.
        max_body_bytes = max(DEFAULT_MAX_BODY_BYTES, _largest_submission_body(registry))
    webhook_secrets = WebhookSecrets.from_settings(settings, config.webhooks)
    tekton_receiver = TektonReceiver.from_config(config.signals.tekton)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # How late the event loop wakes: workers give way to answers (queue.give_way).
        loop_lag = LoopLag(in_flight=lambda: getattr(app, "requests_in_flight", 0))
        batcher = webhooks.intake_batcher(app, build_sessions(intake_engine))
        runtime.start(request_lag=_answers_behind(loop_lag, batcher))
        app.state.attention = runtime.attention
        app.state.runtime = Runtime(
            runtime.engine, runtime.sessions, registry, runtime.manager, runtime.audit, gate
        )
        loop_lag.start()
        try:
            yield
        finally:
            await loop_lag.stop()
            # Each part is stopped even when an earlier one fails.
            for stop in (runtime.stop, gate.close, intake_engine.dispose):
                try:
                    stop()
                except Exception:
                    logger.exception("error while shutting down")

    app = ServiceApp(
        title="workqueue-service",
        version=__version__,
        description="Validated, audited GitLab writes for automated callers.",
        lifespan=lifespan,
        docs_url=None,  # mount_api_docs serves them from bundled assets
        redoc_url=None,
    )
    mount_api_docs(app)
    app.state.metrics = service_metrics
    app.state.probe_engine = probe_engine
    app.state.webhook_secrets = webhook_secrets
    app.state.tekton = tekton_receiver
    app.state.webhook_projects = runtime.projects
    setattr(app.state, FAILED_AUTHENTICATIONS_KEY, FailedAuthentications())
    path_limits = {
        webhooks.WEBHOOK_PATH: webhooks.MAX_BODY_BYTES,
        tekton.TEKTON_PATH: tekton.MAX_BODY_BYTES,
    }
    largest_body = max_body_bytes
    app.answer_rules = AnswerRules(
        limit_for=lambda path: body_limit(path, largest_body, path_limits),
        timeout_seconds=body_timeout_seconds,
    )
    # The last added runs first: one of each credential, authenticate, then read
    # the body, then route.
    app.add_middleware(webhooks.WebhookReceiver)  # the webhook, without the router
    app.add_middleware(
        BodyReader,
        max_bytes=max_body_bytes,
        path_limits=path_limits,
        timeout_seconds=body_timeout_seconds,
        inspect=StrictJSONBodies(path_prefix=API_PREFIX, exempt_paths={webhooks.WEBHOOK_PATH}),
    )
    app.add_middleware(
        AuthenticateFirst, exempt=AUTHENTICATES_ITSELF, alternatives=ALTERNATIVE_CREDENTIALS
    )
    app.add_middleware(webhooks.WebhookTokenFirst)
    app.add_middleware(OneOfEachCredential)
    runtime.observability.instrument(
        app,
        registry=service_metrics.registry,
        engine=probe_engine,
        types=registry,
        cache_seconds=metrics_cache_seconds,
    )
    app.add_exception_handler(RequestValidationError, validation_error_answer)
    app.add_exception_handler(GitLabError, _gitlab_error)
    app.add_exception_handler(Exception, _internal_error)
    answer_database_outages(app)
    # Type routes first: `/api/work-items/mr` must not be taken for an item id.
    for router in (
        health.router,
        metrics.router,
        *catalog().routers(),
        webhooks.router,
        signals.router,
        tekton.router,
        attention_router,
        item_history.router,
        work_items.router,
    ):
        app.include_router(router)
    mount_dashboard(app)
    return app


class ServiceApp(FastAPI):
    """FastAPI, with webhook deliveries sent past the outer layers that do nothing for them,
    and every answer under `answer_rules` (`api.answers`: no-store, refusals drained).

    Before the app's own middleware, FastAPI and Starlette run five layers on
    every request: the telemetry check, the server-error handler, exception
    telemetry, the app-wide body limit and the dashboard's headers. On
    `POST /api/webhooks/gitlab` only the server-error handler does anything
    (telemetry is off unless tracing is configured, the app has no
    `max_body_size`, and the dashboard headers are for `/ui`). Webhooks, the
    one route called hundreds of times a second, enter at the request metrics
    instead, behind a server-error handler of their own; everything from the
    metrics inwards (token, body reader, receiver) is the same objects as for
    any request.

    The shortcut is taken only when the built stack is exactly those layers
    (see `_webhook_entry`): tracing, Sentry, a body limit or any other
    middleware outside the metrics turns it off, and webhooks take the full
    stack. It is decided at the first webhook, when instrumentation (started
    by `create_app`) is in place.
    """

    _webhook_stack: ASGIApp | None = None
    _webhook_checked = False
    # Set by `create_app`; around the whole stack, so that no answer leaves without them.
    answer_rules: AnswerRules | None = None
    # HTTP requests being served (read by `LoopLag`; changed on the event loop only).
    requests_in_flight = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await super().__call__(scope, receive, send)
            return
        self.requests_in_flight += 1
        tekton.take_query_token(scope)  # before anything logs or traces the URL
        if self.answer_rules is not None:
            receive, send = self.answer_rules.exchange(scope, receive, send)
        try:
            if scope["path"] == webhooks.WEBHOOK_PATH and scope["method"] == "POST":
                entry = self._webhook_stack if self._webhook_checked else self._webhook_entry()
                if entry is not None:
                    scope["app"] = self  # what Starlette sets; the layers read app.state
                    await entry(scope, receive, send)
                    return
            await super().__call__(scope, receive, send)
        finally:
            self.requests_in_flight -= 1

    def _webhook_entry(self) -> ASGIApp | None:
        """The webhook's stack: a server-error handler around the request metrics, or None."""
        self._webhook_checked = True
        telemetry = getattr(self, "_native_telemetry", None)
        if telemetry is None and _FASTAPI_TELEMETRY:
            return None  # telemetry this code does not know how to ask about
        if self.root_path or (telemetry is not None and telemetry.enabled()):
            return None
        # Sentry (and other instrumentation) wraps Starlette's own __call__: then
        # skipping it would skip them, so webhooks take the full stack.
        for method, module in (
            (Starlette.__call__, "starlette.applications"),
            (FastAPI.__call__, "fastapi.applications"),
        ):
            if getattr(method, "__module__", None) != module:
                logger.info("webhooks take the full stack (%s is instrumented)", module)
                return None
        if self.middleware_stack is None:
            self.middleware_stack = self.build_middleware_stack()
        top = self.middleware_stack
        if not isinstance(top, ServerErrorMiddleware):
            return None
        layer: object = top.app
        while not isinstance(layer, HTTPMetrics):
            # Exact types: a subclass or any other middleware may act on webhooks.
            if type(layer) not in _IDLE_FOR_WEBHOOKS:
                logger.info("webhooks take the full middleware stack (%s)", type(layer).__name__)
                return None
            layer = getattr(layer, "app", None)
        self._webhook_stack = ServerErrorMiddleware(layer, handler=top.handler, debug=top.debug)
        return self._webhook_stack


# Layers outside the request metrics that pass a webhook delivery through untouched:
# exception telemetry without a provider, the body limit without `max_body_size`
# (it wraps nothing then), the dashboard's headers outside `/ui`.
def _idle_for_webhooks() -> tuple[frozenset[type], bool]:
    """The layers, and whether this FastAPI has its native telemetry. Both are
    private modules of recent FastAPI versions; older ones have neither layer."""
    layers: set[type] = {DashboardHeaders}
    telemetry = False
    try:
        from fastapi._body_limit import AppBodyLimitMiddleware  # noqa: PLC0415

        layers.add(AppBodyLimitMiddleware)
    except ImportError:
        pass
    try:
        from fastapi.telemetry._asgi import ExceptionTelemetryMiddleware  # noqa: PLC0415

        layers.add(ExceptionTelemetryMiddleware)
        telemetry = True
    except ImportError:
        pass
    return frozenset(layers), telemetry


_IDLE_FOR_WEBHOOKS, _FASTAPI_TELEMETRY = _idle_for_webhooks()


async def _gitlab_error(request: Request, error: Exception) -> JSONResponse:
    # A GitLab call made on behalf of the request (e.g. closing an MR on cancel)
    # failed; nothing was committed. The message never holds the token.
    logger.warning("GitLab failed during %s %s: %s", request.method, request.url.path, error)
    return JSONResponse({"detail": str(error)}, status_code=502)


async def _internal_error(request: Request, error: Exception) -> JSONResponse:
    logger.error("unhandled error on %s %s", request.method, request.url.path, exc_info=error)
    return JSONResponse({"detail": "internal server error"}, status_code=500)


def _largest_submission_body(registry: TypeRegistry) -> int:
    """Room for the largest submission a type accepts, base64-encoded, plus its JSON."""
    largest = 0
    for registration in registry:
        total = getattr(registration.config, "max_total_bytes", None)
        if isinstance(total, int):
            largest = max(largest, total * 4 // 3 + 1024 * 1024)
    return largest
