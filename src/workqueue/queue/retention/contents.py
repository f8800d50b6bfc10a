"""Retention of contents: finished items lose their contents after `retention.content_days`.

What "contents" are is the type's to say (for `mr`: file contents, description
and commit message). Run by the safety sweep of every replica that processes
items. Each batch is one short transaction that locks its rows with SKIP
LOCKED, marks them emptied (`contents_dropped_at`) and lets the item's type drop
the contents and set `content_bytes` to what is left
(`ItemTypeRegistration.content_dropper`), so:

- replicas sweeping at once share the work and never wait for each other;
- a retry or a resubmission holding an item's row lock is skipped, and finds
  the drop when it comes first (both lock the row before they read it);
- an item already emptied no longer matches: running it again changes nothing.

A sweep stops after `SWEEP_SECONDS` of batches and leaves the rest to the next
one, so the dispatcher it runs on is never held for long.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from datetime import timedelta

from sqlalchemy.orm import Session, sessionmaker

from workqueue.queue.registry import TypeRegistry
from workqueue.queue.retention import repository as retention_repository

logger = logging.getLogger(__name__)

BATCH_SIZE = 50
SWEEP_SECONDS = 1.0


def drop_finished_contents(
    sessions: sessionmaker[Session],
    registry: TypeRegistry,
    *,
    age: timedelta,
    batch_size: int = BATCH_SIZE,
    budget_seconds: float = SWEEP_SECONDS,
    clock: Callable[[], float] = time.monotonic,
) -> int:
    """Drop the contents of items finished more than `age` ago; the number dropped."""
    started = clock()
    dropped = 0
    with sessions() as session:
        cutoff = retention_repository.cutoff_before(session, age)
        session.commit()
    for registration in registry:
        dropper = registration.content_dropper
        if dropper is None:
            continue
        while True:
            with sessions() as session:
                ids = retention_repository.take_finished_contents(
                    session, item_type=registration.item_type, cutoff=cutoff, batch_size=batch_size
                )
                if ids:
                    dropper(session, ids)
                session.commit()
            dropped += len(ids)
            if len(ids) < batch_size:
                break
            if clock() - started >= budget_seconds:
                return dropped
    return dropped


def sweep_contents(
    sessions: sessionmaker[Session], registry: TypeRegistry, *, age: timedelta
) -> None:
    """The safety sweep's call: `drop_finished_contents`, logged; never raises (the
    next sweep tries again)."""
    try:
        dropped = drop_finished_contents(sessions, registry, age=age)
    except Exception:
        logger.exception("dropping finished items' contents failed; the next sweep retries")
        return
    if dropped:
        logger.info("dropped the contents of %d items finished over %s ago", dropped, age)
