"""The owners' own parts of the background loop: what an outage must not do to them."""

from __future__ import annotations

import contextlib
import threading
import time
from contextlib import contextmanager

import sqlalchemy as sa

from workqueue.notifications.delivery import OutboxDeliveryWorker
from workqueue.queue import TypeRegistry
from workqueue.queue.background import Backoff
from workqueue.queue.intake.resolver import IntakeResolver
from workqueue.queue.outbox.config import NotificationsConfig
from workqueue.queue.outbox.emit import Outbox, Subscriber


def _down():
    @contextmanager
    def sessions():
        raise sa.exc.TimeoutError("pool timed out")
        yield  # pragma: no cover

    return sessions


def test_intake_reconnect_cuts_the_outage_backoff_short() -> None:
    """The listener reconnecting means the database is back: resolve at once, not after
    the rest of the outage's backoff."""
    resolver = IntakeResolver(
        sessions=_down(), registry=TypeRegistry(), on_items=lambda _ids: None, sweep_seconds=600
    )
    # Deep into an outage the delay is MAX_FAILURE_DELAY_SECONDS (30 s); 5 s keeps this short.
    resolver._backoff = Backoff(5.0, 5.0)
    calls: list[float] = []
    resumed = threading.Event()

    def resolve_waiting() -> int:
        calls.append(time.monotonic())
        if len(calls) == 1:
            raise sa.exc.TimeoutError("database down")
        resumed.set()
        return 0

    resolver.resolve_waiting = resolve_waiting  # type: ignore[method-assign]
    resolver.start()
    try:
        deadline = time.monotonic() + 2
        while not calls and time.monotonic() < deadline:
            time.sleep(0.01)
        assert calls, "first round never ran"
        resolver._on_listener_connected()  # the database is back: the listener reconnected
        assert resumed.wait(1.0), "resolution waited out the whole backoff despite the wake-up"
    finally:
        resolver.stop(timeout=10)


def test_a_failed_outbox_sweep_does_not_hold_a_drain_slot() -> None:
    """A sweep whose prune fails (the database is down) must leave no drain slot
    counted for a drain that never ran."""
    subscriber = Subscriber(
        name="s",
        url="http://127.0.0.1:9/",
        secret="whsec_" + "A" * 32,
        events=frozenset({"item.finished"}),
        item_types=None,
        project_regexes=None,
    )
    worker = OutboxDeliveryWorker(
        sessions=_down(), outbox=Outbox([subscriber], NotificationsConfig(workers=1))
    )
    try:
        with contextlib.suppress(sa.exc.TimeoutError):
            worker.run_round()  # startup sweep during an outage
        # The drain it started meets the outage too and ends; a slot counted for a drain
        # that never started would stay counted.
        deadline = time.monotonic() + 5
        while worker.active_count and time.monotonic() < deadline:
            time.sleep(0.01)
        assert worker.active_count == 0, "a drain slot is held by a drain that never started"
    finally:
        worker.stop(timeout=0.1)


def test_an_outage_of_a_few_seconds_leaves_every_drain_slot_free() -> None:
    subscriber = Subscriber(
        name="s",
        url="http://127.0.0.1:9/",
        secret="whsec_" + "A" * 32,
        events=frozenset({"item.finished"}),
        item_types=None,
        project_regexes=None,
    )
    worker = OutboxDeliveryWorker(sessions=_down(), outbox=Outbox([subscriber]))  # 4 workers
    worker._backoff = Backoff(0.01, 0.01)  # the real 0.5+1+2+4 s, shortened
    worker.start()
    time.sleep(0.5)
    leaked = worker.active_count
    started = time.monotonic()
    worker.stop(timeout=1.0)
    assert leaked == 0
    # With a slot leaked, stop would wait its whole timeout for a drain that never ran.
    assert time.monotonic() - started < 0.5
