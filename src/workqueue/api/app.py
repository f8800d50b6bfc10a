"""Application factory: everything is built from the settings, nothing at import time."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import cast

from fastapi import FastAPI
from sqlalchemy.engine import URL, Engine
from sqlalchemy.orm import Session, sessionmaker

from workqueue import __version__
from workqueue.api import health
from workqueue.config import ServiceConfig
from workqueue.db.engine import build_engine, build_sessions
from workqueue.db.url import libpq_conninfo, normalize_database_url
from workqueue.queue.audit import AuditLog, ObjectStore
from workqueue.queue.processing import ProcessingManager
from workqueue.queue.registry import TypeRegistry
from workqueue.settings import Settings
from workqueue.types.catalog import build_registry, install_context

logger = logging.getLogger(__name__)

# Headroom above the worker pool for requests, the dispatcher and the heartbeat.
EXTRA_CONNECTIONS = 8


@dataclass
class Runtime:
    """What the lifespan builds and the routes use."""

    engine: Engine
    sessions: sessionmaker[Session]
    registry: TypeRegistry
    manager: ProcessingManager
    audit: AuditLog


def create_app(
    settings: Settings,
    config: ServiceConfig,
    *,
    database_url: URL | None = None,
    process_items: bool = True,
) -> FastAPI:
    """Build the service. `database_url` overrides DATABASE_URL (the embedded cluster's)."""
    if database_url is None:
        if settings.database_url is None:
            raise ValueError("no database: set DATABASE_URL or pass database_url")
        database_url = normalize_database_url(settings.database_url)
    url = database_url
    registry = build_registry(config.handled_types, install_context(settings))

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        engine = build_engine(url, pool_size=config.processing.workers + EXTRA_CONNECTIONS)
        sessions = build_sessions(engine)
        audit = build_audit_log(settings)
        manager = ProcessingManager(
            sessions=sessions,
            registry=registry,
            config=config.processing,
            handled_types=registry.item_types if process_items else (),
            audit=audit,
            listen_conninfo=libpq_conninfo(url),
        )
        app.state.runtime = Runtime(engine, sessions, registry, manager, audit)
        manager.start()
        try:
            yield
        finally:
            # DDR-36: stop taking work, let running actions finish, release leases.
            manager.stop(timeout=30)
            audit.close()
            engine.dispose()

    app = FastAPI(title="workqueue-service", version=__version__, lifespan=lifespan)
    app.include_router(health.router)
    return app


def build_audit_log(settings: Settings) -> AuditLog:
    if not settings.audit_s3_bucket:
        return AuditLog()
    try:
        import boto3  # noqa: PLC0415 - optional dependency, only with a bucket configured
    except ImportError as error:
        raise RuntimeError(
            "WORKQUEUE_SERVICE_AUDIT_S3_BUCKET is set but boto3 is not installed "
            "(pip install 'workqueue-service[s3]')"
        ) from error
    store = cast("ObjectStore", boto3.client("s3"))
    return AuditLog(object_store=store, bucket=settings.audit_s3_bucket)
