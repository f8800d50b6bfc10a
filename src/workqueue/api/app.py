"""Application factory: everything is built from the settings, nothing at import time."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import cast

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy.engine import URL
from sqlalchemy.orm import Session, sessionmaker
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
from workqueue.api.routes import health, item_history, metrics, work_items
from workqueue.api.routes.attention import router as attention_router
from workqueue.api.routes.docs_pages import mount_api_docs
from workqueue.api.webhooks import route as webhooks
from workqueue.api.webhooks.batcher import MAX_IN_FLIGHT, STORE_TIMEOUT_SECONDS, IntakeBatcher
from workqueue.api.webhooks.secrets import WebhookSecrets
from workqueue.attention.reconciler import AttentionReconciler
from workqueue.config import ServiceConfig
from workqueue.db.engine import (
    build_engine,
    build_intake_engine,
    build_probe_engine,
    build_sessions,
)
from workqueue.db.url import libpq_conninfo, normalize_database_url
from workqueue.gitlab.errors import GitLabError
from workqueue.notifications.delivery import OutboxDeliveryWorker
from workqueue.observability import Observability
from workqueue.observability.http_metrics import HTTPMetrics
from workqueue.observability.service_metrics import METRICS_CACHE_SECONDS, ServiceMetrics
from workqueue.queue.audit.history import AuditHistory
from workqueue.queue.audit.log import AuditLog, ObjectStore
from workqueue.queue.outbox.emit import Outbox
from workqueue.queue.processing.manager import ProcessingManager
from workqueue.queue.registry import TypeRegistry
from workqueue.receivers.projects import ProjectDirectory
from workqueue.receivers.sqs import SqsEventConsumer, build_sqs_consumer, sqs_location
from workqueue.settings import Settings
from workqueue.types.catalog import build_registry, catalog
from workqueue.types.plugin import InstallContext, install_context
from workqueue.ui.browser_guard import DashboardHeaders
from workqueue.ui.mount import mount_dashboard

logger = logging.getLogger(__name__)

# Headroom above the worker pool for requests, the dispatcher and the heartbeat.
EXTRA_CONNECTIONS = 8
# Routes under /api/ that authenticate on their own (see api/middleware/authentication.py).
AUTHENTICATES_ITSELF = frozenset({("POST", webhooks.WEBHOOK_PATH), ("GET", "/api/work-items/me")})


def _answers_behind(loop_lag: LoopLag, batcher: IntakeBatcher) -> Callable[[], float]:
    """How far behind the answers are, for the workers to give way to (queue.give_way):
    the event loop wakes late, or a webhook transaction waits for the interpreter."""
    return lambda: max(loop_lag(), batcher.behind())


def create_app(  # noqa: PLR0915 - the one place everything is wired
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
    """Build the service. `database_url` overrides DATABASE_URL (the embedded cluster's);
    `type_context` and `gatekeeper` replace what the settings would build (tests);
    a request body must arrive within `body_timeout_seconds` (408); scrape-time
    gauges that query the database are cached for `metrics_cache_seconds`."""
    if database_url is None:
        if settings.database_url is None:
            raise ValueError("no database: set DATABASE_URL or pass database_url")
        database_url = normalize_database_url(settings.database_url)
    url = database_url
    engine = build_engine(url, pool_size=config.processing.workers + EXTRA_CONNECTIONS)
    # /readyz and scrape-time gauges: a pool of their own, so a saturated work
    # pool neither fails readiness nor gets scrapes added to its queue.
    probe_engine = build_probe_engine(url)
    # Webhook deliveries are stored on connections of their own (IntakeBatcher).
    intake_engine = build_intake_engine(
        url, connections=MAX_IN_FLIGHT, statement_timeout_seconds=STORE_TIMEOUT_SECONDS
    )
    service_metrics = ServiceMetrics(probe_engine, cache_seconds=metrics_cache_seconds)
    context = type_context or install_context(settings, on_gitlab_call=service_metrics.gitlab_call)
    registry = build_registry(config.handled_types, context)
    service_metrics.watch_types(registry)
    gate = gatekeeper or build_gatekeeper(settings, config)
    if settings.events_queue_url:
        sqs_location(settings.events_queue_url)  # a malformed URL stops startup, not the lifespan
    if max_body_bytes is None:
        # Default: what the largest allowed submission needs, at least 16 MiB.
        max_body_bytes = max(DEFAULT_MAX_BODY_BYTES, _largest_submission_body(registry))
    # Audit entries also go to the database history, with its own sessions.
    history = AuditHistory(build_sessions(engine), retention=config.audit.retention)
    audit = build_audit_log(settings, history=history)
    webhook_secrets = WebhookSecrets.from_settings(settings, config.webhooks)
    # GitLab's id <-> path answers for webhook and SQS bodies (one client per gitlab_url).
    webhook_projects = ProjectDirectory.for_registry(registry, context)
    observability = Observability.start(settings)  # Sentry, traces: closed by the lifespan

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        sessions = build_sessions(engine)
        # How late the event loop wakes: workers give way to answers (queue.give_way).
        loop_lag = LoopLag(in_flight=lambda: getattr(app, "requests_in_flight", 0))
        # Before any processing: every session's emit() must reach the subscribers.
        deliveries = _notification_worker(config, sessions, libpq_conninfo(url), audit)
        # Keeps the attention queues; told by the engine about every committed change.
        attention = AttentionReconciler(
            sessions=sessions,
            registry=registry,
            rules=config.attention.queues,
            audit=audit,
            listen_conninfo=libpq_conninfo(url),
        )
        app.state.attention = attention
        manager = ProcessingManager(
            sessions=sessions,
            registry=registry,
            config=config.processing,
            handled_types=registry.item_types if process_items else (),
            audit=audit,
            listen_conninfo=libpq_conninfo(url),
            observer=observability.engine_observer(service_metrics),
            on_item_committed=attention.item_changed,
            request_lag=_answers_behind(
                loop_lag, webhooks.intake_batcher(app, build_sessions(intake_engine))
            ),
            content_retention=config.retention.content_age,
        )
        app.state.runtime = Runtime(engine, sessions, registry, manager, audit, gate)
        consumer = build_sqs_consumer(
            settings,
            sessions=sessions,
            registry=registry,
            on_stored=manager.intake.stored_here,  # its NOTIFY wakes the resolver
            metrics=service_metrics,
            projects=webhook_projects,
        )
        loop_lag.start()
        manager.start()
        attention.start()
        if consumer is not None:
            consumer.start()
        deliveries.start()  # does nothing without subscribers
        try:
            yield
        finally:
            await loop_lag.stop()
            # Each part is stopped even when an earlier one fails: a stop
            # that raised must not leave threads and connections behind.
            stops: tuple[Callable[[], None], ...] = (
                lambda: _stop_background(consumer, manager, deliveries),
                lambda: attention.stop(timeout=30),
                audit.close,
                gate.close,
                webhook_projects.close,
                engine.dispose,
                probe_engine.dispose,
                intake_engine.dispose,
                observability.close,
            )
            for stop in stops:
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
    app.state.webhook_projects = webhook_projects
    setattr(app.state, FAILED_AUTHENTICATIONS_KEY, FailedAuthentications())
    path_limits = {webhooks.WEBHOOK_PATH: webhooks.MAX_BODY_BYTES}
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
    app.add_middleware(AuthenticateFirst, exempt=AUTHENTICATES_ITSELF)
    app.add_middleware(webhooks.WebhookTokenFirst)
    app.add_middleware(OneOfEachCredential)
    observability.instrument(
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


def _notification_worker(
    config: ServiceConfig, sessions: sessionmaker[Session], conninfo: str, audit: AuditLog
) -> OutboxDeliveryWorker:
    """Attach the outbox to `sessions` and build its delivery worker (not started)."""
    outbox = Outbox.from_config(config.notifications)  # reads the subscribers' secrets
    outbox.attach(sessions)
    return OutboxDeliveryWorker(
        sessions=sessions,
        outbox=outbox,
        listen_conninfo=conninfo,
        audit=audit,
        safety_sweep_seconds=config.processing.safety_sweep_seconds,
    )


def _stop_background(
    consumer: SqsEventConsumer | None, manager: ProcessingManager, deliveries: OutboxDeliveryWorker
) -> None:
    # DDR-36: stop the SQS consumer first, so nothing is stored after the
    # manager stops; then stop taking work, let running actions finish,
    # release leases; last the deliveries, since those steps may have emitted.
    if consumer is not None:
        consumer.stop(timeout=30)
    manager.stop(timeout=30)
    deliveries.stop(timeout=15)


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


def build_audit_log(settings: Settings, *, history: AuditHistory | None = None) -> AuditLog:
    if not settings.audit_s3_bucket:
        return AuditLog(history=history)
    try:
        import boto3  # noqa: PLC0415 - optional dependency, only with a bucket configured
    except ImportError as error:
        raise RuntimeError(
            "WORKQUEUE_SERVICE_AUDIT_S3_BUCKET is set but boto3 is not installed "
            "(pip install 'workqueue-service[s3]')"
        ) from error
    store = cast("ObjectStore", boto3.client("s3"))
    return AuditLog(object_store=store, bucket=settings.audit_s3_bucket, history=history)
