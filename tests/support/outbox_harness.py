"""Outbox test helpers: subscribers with generated secrets, a running delivery worker."""

from __future__ import annotations

import base64
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Session, sessionmaker

from workqueue.notifications.delivery import OutboxDeliveryWorker
from workqueue.queue.audit.log import AuditEntry, AuditLog
from workqueue.queue.outbox.config import NotificationsConfig
from workqueue.queue.outbox.emit import Outbox, Subscriber

FAST_NOTIFICATIONS: dict[str, Any] = {
    "timeout_seconds": 2,
    "backoff_initial_seconds": 0.05,
    "backoff_max_seconds": 0.2,
}


def new_secret() -> str:
    return "whsec_" + base64.b64encode(os.urandom(24)).decode()


def subscriber(
    name: str,
    url: str,
    events: list[str],
    *,
    secret: str | None = None,
    item_types: list[str] | None = None,
    projects: list[str] | None = None,
) -> Subscriber:
    from workqueue.project_patterns import scope_regexes  # noqa: PLC0415

    return Subscriber(
        name=name,
        url=url,
        secret=secret or new_secret(),
        events=frozenset(events),
        item_types=None if item_types is None else frozenset(item_types),
        project_regexes=None if projects is None else scope_regexes(projects, {}),
    )


def make_outbox(*subscribers: Subscriber, **config: Any) -> Outbox:
    return Outbox(subscribers, NotificationsConfig(**{**FAST_NOTIFICATIONS, **config}))


class RecordingAudit(AuditLog):
    def __init__(self) -> None:
        super().__init__()
        self.entries: list[AuditEntry] = []

    def write(self, entry: AuditEntry, **_: Any) -> None:
        self.entries.append(entry)


@contextmanager
def running_deliveries(
    sessions: sessionmaker[Session],
    outbox: Outbox,
    *,
    conninfo: str | None = None,
    audit: AuditLog | None = None,
    safety_sweep_seconds: float = 300,
) -> Iterator[OutboxDeliveryWorker]:
    worker = OutboxDeliveryWorker(
        sessions=sessions,
        outbox=outbox,
        listen_conninfo=conninfo,
        audit=audit,
        safety_sweep_seconds=safety_sweep_seconds,
    )
    worker.start()
    try:
        yield worker
    finally:
        worker.stop(timeout=10)


def outbox_rows(sessions: sessionmaker[Session]) -> list[Any]:
    with sessions() as session:
        return list(
            session.execute(
                sa.text(
                    "SELECT id, event_id, subscriber, event_type, work_item_id, data, status, "
                    "attempts, last_error, delivered_at, abandoned_at FROM outbox_deliveries "
                    "ORDER BY id"
                )
            ).all()
        )
