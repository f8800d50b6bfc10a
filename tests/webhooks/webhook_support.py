"""Helpers for the webhook / SQS ingestion tests: a live app with the receiver, MR items."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from fastapi import FastAPI
from live_app import serve_in_thread
from mr_harness import TOKEN, body, submit
from sqlalchemy.orm import Session, sessionmaker

from workqueue.api.app import create_app
from workqueue.api.deps import Runtime
from workqueue.api.webhooks import route as webhooks
from workqueue.api.webhooks.secrets import WebhookSecrets
from workqueue.config import ServiceConfig
from workqueue.gitlab.client import GitLabClient
from workqueue.queue.registry import ItemTypeRegistration, TypeRegistry
from workqueue.settings import Settings
from workqueue.types.catalog import build_registry
from workqueue.types.mr.resolvers import MR_RESOLVERS
from workqueue.types.plugin import InstallContext

# Two secrets as during a rotation, with the whitespace an operator may leave.
SECRETS = " old-secret , new-secret ,"
OLD_SECRET = "old-secret"
NEW_SECRET = "new-secret"


@dataclass
class WebhookApp:
    url: str  # the receiver's full URL
    base_url: str
    app: FastAPI
    runtime: Runtime


def wire_webhooks(app: FastAPI, settings: Settings) -> None:
    """What `create_app` does once the receiver is wired (no-op then: it sets the secrets
    together with the route)."""
    if not hasattr(app.state, webhooks.STATE_KEY):
        app.include_router(webhooks.router)
        setattr(app.state, webhooks.STATE_KEY, WebhookSecrets.from_settings(settings))


def ensure_mr_resolvers(registration: ItemTypeRegistration) -> None:
    """Register the MR resolvers unless `install_mr` already did."""
    for event_type, resolver in MR_RESOLVERS.items():
        if event_type not in registration.resolvers:
            registration.add_resolver(event_type, resolver)


def service_config(gitlab_url: str) -> ServiceConfig:
    return ServiceConfig.model_validate(
        {
            "processing": {
                "workers": 2,
                "lease_seconds": 3,
                "heartbeat_seconds": 1,
                "backoff_initial_seconds": 0.05,
                "backoff_max_seconds": 0.2,
            },
            "handled_types": {"mr": {"gitlab_url": gitlab_url}},
        }
    )


def install_context() -> InstallContext:
    return InstallContext(
        gitlab_token=TOKEN,
        gitlab_client_factory=lambda url, token: GitLabClient(url, token, timeout=5),
    )


def receiver_app(database_url: Any, gitlab_url: str) -> FastAPI:
    """The service built by `create_app` with the receiver and the rotation's two
    secrets, items not processed (the caller serves it)."""
    settings = Settings(WORKQUEUE_SERVICE_GITLAB_WEBHOOK_SECRET=SECRETS)
    app = create_app(
        settings,
        service_config(gitlab_url),
        database_url=database_url,
        process_items=False,
        type_context=install_context(),
    )
    wire_webhooks(app, settings)
    return app


@contextmanager
def webhook_app(
    database_url: Any,
    gitlab_url: str,
    *,
    secrets: str | None = SECRETS,
    process_items: bool = False,
    **app_options: Any,
) -> Iterator[WebhookApp]:
    """The service built by `create_app`, with the receiver, served on a free port.

    Items are not processed by default, so stored events stay visible.
    """
    settings = Settings(
        WORKQUEUE_SERVICE_LOCAL_AUTH_USER="dev-user",
        WORKQUEUE_SERVICE_GITLAB_WEBHOOK_SECRET=secrets,
    )
    app = create_app(
        settings,
        service_config(gitlab_url),
        database_url=database_url,
        process_items=process_items,
        type_context=install_context(),
        **app_options,
    )
    wire_webhooks(app, settings)
    with serve_in_thread(app) as base_url:
        runtime: Runtime = app.state.runtime
        ensure_mr_resolvers(runtime.registry.get("mr"))
        yield WebhookApp(base_url + webhooks.WEBHOOK_PATH, base_url, app, runtime)


def mr_registry(gitlab_url: str = "https://gitlab.example.com") -> TypeRegistry:
    registry = build_registry({"mr": {"gitlab_url": gitlab_url}}, install_context())
    ensure_mr_resolvers(registry.get("mr"))
    return registry


def make_item(
    sessions: sessionmaker[Session],
    registry: TypeRegistry,
    *,
    project: str,
    source_branch: str,
    target_branch: str | None = "main",
    mr_iid: int | None = None,
    mr_sha: str | None = None,
    head_pipeline_id: int | None = None,
    phase: str = "active",
) -> uuid.UUID:
    """An MR item submitted through the real service, then given its GitLab-side state."""
    result = submit(
        sessions,
        registry,
        body(project=project, source_branch=source_branch, target_branch=target_branch),
    )
    item_id = result.item.id
    with sessions() as session:
        session.execute(
            sa.text(
                "UPDATE mr_details SET mr_iid = :mr_iid, mr_sha = :mr_sha, "
                "  head_pipeline_id = :pipeline, target_branch = :target WHERE id = :id"
            ),
            {
                "id": item_id,
                "mr_iid": mr_iid,
                "mr_sha": mr_sha,
                "pipeline": head_pipeline_id,
                "target": target_branch,
            },
        )
        session.execute(
            sa.text("UPDATE work_items SET phase = :phase, actionable = false WHERE id = :id"),
            {"id": item_id, "phase": phase},
        )
        session.commit()
    return item_id


def resolved(sessions: sessionmaker[Session], timeout: float = 15.0) -> None:
    """Wait until the intake resolver has resolved every stored delivery.

    Receivers answer once a delivery is stored; its events are stored behind the
    answer, in the transaction that deletes it from `incoming_deliveries`.
    """
    deadline = time.monotonic() + timeout
    while True:
        with sessions() as session:
            waiting = session.execute(sa.text("SELECT count(*) FROM incoming_deliveries"))
            if waiting.scalar_one() == 0:
                return
        if time.monotonic() > deadline:
            raise AssertionError("stored deliveries were not resolved")
        time.sleep(0.02)


def pending(sessions: sessionmaker[Session]) -> list[tuple[uuid.UUID, str, str | None]]:
    """(item id, event type, dedupe key) of every stored event, once every stored
    delivery has been resolved."""
    resolved(sessions)
    with sessions() as session:
        rows = session.execute(
            sa.text("SELECT work_item_id, event_type, dedupe_key FROM pending_events ORDER BY id")
        ).all()
    return [(row[0], row[1], row[2]) for row in rows]


def deliveries(sessions: sessionmaker[Session]) -> list[tuple[str, str, str]]:
    """(delivery key, source, event type) of every recorded delivery."""
    with sessions() as session:
        rows = session.execute(
            sa.text(
                "SELECT delivery_key, source, event_type FROM received_deliveries "
                "ORDER BY received_at, delivery_key"
            )
        ).all()
    return [(row[0], row[1], row[2]) for row in rows]


def actionable(sessions: sessionmaker[Session], item_id: uuid.UUID) -> bool:
    with sessions() as session:
        return bool(
            session.execute(
                sa.text("SELECT actionable FROM work_items WHERE id = :id"), {"id": item_id}
            ).scalar_one()
        )
