"""The composition root: everything the service runs, built from the settings and the
config, started in order and stopped in reverse.

`ServiceRuntime` owns the database engines, the type registry (from the
catalog's plugins), the audit trail, the GitLab project directory and
observability, and, once started, the background owners: the outbox delivery,
the attention reconciler, the processing manager (with its intake resolver)
and the SQS consumer. Nothing here knows HTTP: `create_app` (api/app.py) builds
one, wires the routes around it and starts it in its lifespan; a worker-only
process could start it without any app.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import cast

from sqlalchemy.engine import URL
from sqlalchemy.orm import Session, sessionmaker

from workqueue.attention.reconciler import AttentionReconciler
from workqueue.config import ServiceConfig
from workqueue.db.engine import build_engine, build_probe_engine, build_sessions
from workqueue.db.url import libpq_conninfo, normalize_database_url
from workqueue.notifications.delivery import OutboxDeliveryWorker
from workqueue.observability import Observability
from workqueue.observability.service_metrics import METRICS_CACHE_SECONDS, ServiceMetrics
from workqueue.queue.audit.history import AuditHistory
from workqueue.queue.audit.log import AuditLog, ObjectStore
from workqueue.queue.outbox.emit import Outbox
from workqueue.queue.processing.manager import ProcessingManager
from workqueue.receivers.projects import ProjectDirectory
from workqueue.receivers.sqs import SqsEventConsumer, build_sqs_consumer, sqs_location
from workqueue.settings import Settings
from workqueue.signals.janitor import SignalJanitor
from workqueue.types.catalog import build_registry
from workqueue.types.plugin import InstallContext, install_context

logger = logging.getLogger(__name__)

# Headroom above the worker pool for requests, the dispatcher and the heartbeat.
EXTRA_CONNECTIONS = 8


class ServiceRuntime:
    """Built at once (a bad config or URL fails here, before anything runs); `start` starts
    the background owners, `stop` stops everything, each part even when another fails."""

    def __init__(
        self,
        settings: Settings,
        config: ServiceConfig,
        *,
        database_url: URL | None = None,
        process_items: bool = True,
        type_context: InstallContext | None = None,
        metrics_cache_seconds: float = METRICS_CACHE_SECONDS,
    ) -> None:
        if database_url is None:
            if settings.database_url is None:
                raise ValueError("no database: set DATABASE_URL or pass database_url")
            database_url = normalize_database_url(settings.database_url)
        self.settings, self.config, self.url = settings, config, database_url
        self._process_items = process_items
        self.engine = build_engine(
            database_url, pool_size=config.processing.workers + EXTRA_CONNECTIONS
        )
        # /readyz and scrape-time gauges: a pool of their own, so a saturated work
        # pool neither fails readiness nor gets scrapes added to its queue.
        self.probe_engine = build_probe_engine(database_url)
        self.metrics = ServiceMetrics(self.probe_engine, cache_seconds=metrics_cache_seconds)
        self.type_context = type_context or install_context(
            settings, on_gitlab_call=self.metrics.gitlab_call
        )
        self.registry = build_registry(config.handled_types, self.type_context)
        self.metrics.watch_types(self.registry)
        if settings.events_queue_url:
            sqs_location(settings.events_queue_url)  # a malformed URL stops startup here
        # Audit entries also go to the database history, with its own sessions.
        history = AuditHistory(build_sessions(self.engine), retention=config.audit.retention)
        self.audit = build_audit_log(settings, history=history)
        # GitLab's id <-> path answers for webhook and SQS bodies (one client per gitlab_url).
        self.projects = ProjectDirectory.for_registry(self.registry, self.type_context)
        self.observability = Observability.start(settings)  # Sentry, traces
        self.sessions = build_sessions(self.engine)
        self._started: _Started | None = None

    @property
    def manager(self) -> ProcessingManager:
        return self._running().manager

    @property
    def attention(self) -> AttentionReconciler:
        return self._running().attention

    def start(self, *, request_lag: Callable[[], float] | None = None) -> None:
        """Start the background owners; `request_lag`: how far behind the answers are, for
        the workers to give way to (queue.processing.give_way)."""
        conninfo = libpq_conninfo(self.url)
        # Before any processing: every session's emit() must reach the subscribers.
        deliveries = _notification_worker(self.config, self.sessions, conninfo, self.audit)
        # Keeps the attention queues; told by the engine about every committed change.
        attention = AttentionReconciler(
            sessions=self.sessions,
            registry=self.registry,
            rules=self.config.attention.queues,
            audit=self.audit,
            listen_conninfo=conninfo,
        )
        manager = ProcessingManager(
            sessions=self.sessions,
            registry=self.registry,
            config=self.config.processing,
            handled_types=self.registry.item_types if self._process_items else (),
            audit=self.audit,
            listen_conninfo=conninfo,
            observer=self.observability.engine_observer(self.metrics),
            on_item_committed=attention.item_changed,
            request_lag=request_lag,
            content_retention=self.config.retention.content_age,
        )
        consumer = build_sqs_consumer(
            self.settings,
            sessions=self.sessions,
            registry=self.registry,
            on_stored=manager.intake.stored_here,  # its NOTIFY wakes the resolver
            metrics=self.metrics,
            projects=self.projects,
            signals=self.config.signals,
            audit=self.audit,
        )
        janitor = SignalJanitor(self.sessions, keep=self.config.signals.keep)
        self._started = _Started(deliveries, attention, manager, consumer, janitor)
        manager.start()
        attention.start()
        if consumer is not None:
            consumer.start()
        deliveries.start()  # does nothing without subscribers
        janitor.start()

    def stop(self) -> None:
        """Stop everything in reverse order; a stop that raised must not leave threads and
        connections behind, so each part is stopped whatever the others did."""
        started = self._started
        self._started = None
        stops: list[Callable[[], object]] = []
        if started is not None:
            stops += [started.stop_background, lambda: started.attention.stop(timeout=30)]
        stops += [
            self.audit.close,
            self.projects.close,
            self.engine.dispose,
            self.probe_engine.dispose,
            self.observability.close,
        ]
        for stop in stops:
            try:
                stop()
            except Exception:
                logger.exception("error while shutting down")

    def _running(self) -> _Started:
        if self._started is None:
            raise RuntimeError("the runtime is not started")
        return self._started


class _Started:
    """The background owners of a started runtime."""

    def __init__(
        self,
        deliveries: OutboxDeliveryWorker,
        attention: AttentionReconciler,
        manager: ProcessingManager,
        consumer: SqsEventConsumer | None,
        janitor: SignalJanitor,
    ) -> None:
        self.deliveries, self.attention = deliveries, attention
        self.manager, self.consumer = manager, consumer
        self.janitor = janitor

    def stop_background(self) -> None:
        # DDR-36: stop the SQS consumer first, so nothing is stored after the
        # manager stops; then stop taking work, let running actions finish,
        # release leases; last the deliveries, since those steps may have emitted.
        if self.consumer is not None:
            self.consumer.stop(timeout=30)
        self.manager.stop(timeout=30)
        self.deliveries.stop(timeout=15)
        self.janitor.stop(timeout=15)


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
