"""Helpers to run managers in tests and wait for the outcome they should reach."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Session, sessionmaker

from workqueue.queue.audit.log import AuditLog
from workqueue.queue.observer import EngineObserver
from workqueue.queue.processing.config import ProcessingConfig
from workqueue.queue.processing.manager import ProcessingManager
from workqueue.queue.registry import TypeRegistry

FAST = {
    "workers": 4,
    "lease_seconds": 3,
    "heartbeat_seconds": 0.5,
    "item_deadline_seconds": 60,
    "safety_sweep_seconds": 300,
    "max_attempts": 3,
    "backoff_initial_seconds": 0.05,
    "backoff_max_seconds": 0.2,
}


def fast_config(**overrides: Any) -> ProcessingConfig:
    return ProcessingConfig(**{**FAST, **overrides})


@contextmanager
def running_manager(
    sessions: sessionmaker[Session],
    registry: TypeRegistry,
    config: ProcessingConfig | None = None,
    *,
    handled_types: Collection[str] = ("sample",),
    conninfo: str | None = None,
    audit: AuditLog | None = None,
    request_lag: Callable[[], float] | None = None,
    observer: EngineObserver | None = None,
) -> Iterator[ProcessingManager]:
    manager = ProcessingManager(
        sessions=sessions,
        registry=registry,
        config=config or fast_config(),
        handled_types=handled_types,
        audit=audit,
        listen_conninfo=conninfo,
        request_lag=request_lag,
        observer=observer,
    )
    manager.start()
    try:
        yield manager
    finally:
        manager.stop(timeout=10)


def wait_until(predicate: Callable[[], bool], timeout: float = 30.0, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.02)
    raise AssertionError(f"timed out after {timeout} s waiting for {what or predicate}")


def item_row(sessions: sessionmaker[Session], item_id: uuid.UUID) -> Any:
    with sessions() as session:
        return session.execute(
            sa.text("SELECT * FROM work_items WHERE id = :id"), {"id": item_id}
        ).one()


def dimension_rows(sessions: sessionmaker[Session], item_id: uuid.UUID) -> dict[str, Any]:
    with sessions() as session:
        rows = session.execute(
            sa.text(
                "SELECT variant, status, pending_until FROM work_item_statuses "
                "WHERE work_item_id = :id"
            ),
            {"id": item_id},
        ).all()
    return {row.variant: row for row in rows}


def settled(sessions: sessionmaker[Session]) -> bool:
    """No item is actionable or leased and no event is waiting."""
    with sessions() as session:
        busy = session.execute(
            sa.text(
                "SELECT (SELECT count(*) FROM work_items "
                "        WHERE actionable OR leased_until IS NOT NULL)"
                "     + (SELECT count(*) FROM pending_events)"
            )
        ).scalar_one()
    return busy == 0
