"""Delivery of outbox rows to a real local HTTP receiver (Standard Webhooks)."""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter

import pytest
import sqlalchemy as sa
from harness import fast_config, running_manager, settled, wait_until
from outbox_harness import (
    RecordingAudit,
    make_outbox,
    new_secret,
    outbox_rows,
    running_deliveries,
    subscriber,
)
from sample_type import Behaviour, build_registry, create_item
from sqlalchemy import event
from standardwebhooks import Webhook
from standardwebhooks.webhooks import WebhookVerificationError
from webhook_receiver import webhook_receiver

from workqueue.db.engine import build_engine, build_sessions
from workqueue.queue.models import WorkItem
from workqueue.queue.outbox import emit as outbox

EVENTS = ["work_item.completed", "work_item.failed", "work_item.cancelled"]


def _emit_for_new_item(sessions, *, event_type="work_item.completed", data=None):
    with sessions() as session:
        item_id = create_item(session, ["a"], notify=False)
        session.flush()
        item = session.get(WorkItem, item_id)
        outbox.emit(session, event_type, item=item, data=data or {})
        session.commit()
    return item_id


def _statuses(sessions) -> Counter:
    return Counter(row.status for row in outbox_rows(sessions))


def test_failed_first_attempt_is_retried_with_the_same_id_and_a_valid_signature(sessions, conninfo):
    secret = new_secret()
    with webhook_receiver(script=[500]) as receiver:
        box = make_outbox(subscriber("chat", receiver.url, EVENTS, secret=secret))
        box.attach(sessions)
        with running_deliveries(sessions, box, conninfo=conninfo):
            item_id = _emit_for_new_item(sessions, data={"completion_reason": "merged"})
            wait_until(lambda: _statuses(sessions) == {"delivered": 1}, what="delivery")
        first, second = receiver.snapshot()

    assert first.webhook_id == second.webhook_id
    assert first.webhook_id.startswith("msg_")
    assert first.body == second.body
    for request in (first, second):
        # The receiver's side of the contract: verify() raises on a bad signature.
        payload = Webhook(secret).verify(request.body, request.headers)
        assert payload["type"] == "work_item.completed"
        assert payload["data"] == {
            "work_item_id": str(item_id),
            "item_type": "sample",
            "phase": "active",
            "project": None,
            "completion_reason": "merged",
        }
        assert payload["timestamp"].endswith("Z")
        assert request.headers["content-type"] == "application/json"
    (row,) = outbox_rows(sessions)
    assert (row.attempts, row.last_error) == (2, "HTTP 500")
    assert row.delivered_at is not None


def test_a_signature_from_another_secret_does_not_verify(sessions, conninfo):
    with webhook_receiver() as receiver:
        box = make_outbox(subscriber("chat", receiver.url, EVENTS))
        box.attach(sessions)
        with running_deliveries(sessions, box, conninfo=conninfo):
            _emit_for_new_item(sessions)
            wait_until(lambda: receiver.hits() == 1, what="delivery")
        (request,) = receiver.snapshot()
    with pytest.raises(WebhookVerificationError):
        Webhook(new_secret()).verify(request.body, request.headers)


def test_a_timeout_counts_as_a_failure_and_is_retried(sessions, conninfo):
    with webhook_receiver(script=["sleep:1.0"]) as receiver:
        box = make_outbox(subscriber("chat", receiver.url, EVENTS), timeout_seconds=0.3)
        box.attach(sessions)
        with running_deliveries(sessions, box, conninfo=conninfo):
            _emit_for_new_item(sessions)
            wait_until(lambda: _statuses(sessions) == {"delivered": 1}, what="delivery")
        requests = receiver.snapshot()
    assert len(requests) == 2
    assert requests[0].webhook_id == requests[1].webhook_id
    (row,) = outbox_rows(sessions)
    assert row.last_error == "timed out after 0.3 s"


def test_gives_up_after_max_age_marks_abandoned_logs_and_audits(sessions, conninfo, caplog):
    audit = RecordingAudit()
    with webhook_receiver(default_status=503) as receiver:
        box = make_outbox(subscriber("chat", receiver.url, EVENTS), max_age_seconds=0.6)
        box.attach(sessions)
        with (
            caplog.at_level(logging.WARNING, logger="workqueue.notifications.delivery"),
            running_deliveries(sessions, box, conninfo=conninfo, audit=audit),
        ):
            item_id = _emit_for_new_item(sessions)
            wait_until(lambda: _statuses(sessions) == {"abandoned": 1}, what="give-up")
            hits = receiver.hits()
            time.sleep(0.5)
            assert receiver.hits() == hits  # nothing more is sent
    (row,) = outbox_rows(sessions)
    assert row.last_error == "HTTP 503"
    assert row.abandoned_at is not None
    assert row.attempts == hits >= 3  # retried with backoff until the deadline
    (entry,) = [e for e in audit.entries if e.event_type == "notification_abandoned"]
    assert entry.work_item_id == item_id
    assert entry.details["subscriber"] == "chat"
    assert entry.details["attempts"] == hits
    assert "abandoned" in caplog.text


def test_two_replicas_never_deliver_one_row_twice(database_url, sessions, conninfo):
    engines = [build_engine(database_url, pool_size=8) for _ in range(2)]
    with webhook_receiver() as receiver:
        box = make_outbox(subscriber("chat", receiver.url, EVENTS), workers=4)
        box.attach(sessions)
        with sessions() as session:
            for _ in range(150):
                outbox.emit(
                    session,
                    "work_item.completed",
                    item=None,
                    data={"item_type": "sample", "phase": "completed"},
                )
            session.commit()
        try:
            with (
                running_deliveries(build_sessions(engines[0]), box, conninfo=conninfo),
                running_deliveries(build_sessions(engines[1]), box, conninfo=conninfo),
            ):
                wait_until(
                    lambda: _statuses(sessions) == {"delivered": 150}, timeout=60, what="all"
                )
        finally:
            for engine in engines:
                engine.dispose()
        per_id = Counter(request.webhook_id for request in receiver.snapshot())
    assert len(per_id) == 150
    assert set(per_id.values()) == {1}


def test_idle_worker_sends_no_sql(sessions, engine, conninfo):
    statements: list[str] = []
    event.listen(engine, "before_cursor_execute", lambda *args: statements.append(args[2]))
    with webhook_receiver(script=[500]) as receiver:
        box = make_outbox(subscriber("chat", receiver.url, EVENTS))
        box.attach(sessions)
        with running_deliveries(sessions, box, conninfo=conninfo) as worker:
            _emit_for_new_item(sessions)
            wait_until(lambda: _statuses(sessions) == {"delivered": 1}, what="delivery")
            wait_until(lambda: worker.active_count == 0, what="drains to finish")
            time.sleep(0.3)
            statements.clear()
            time.sleep(1.5)
            assert statements == []
            # ...and it still wakes up for new rows.
            _emit_for_new_item(sessions)
            wait_until(lambda: _statuses(sessions) == {"delivered": 2}, what="second delivery")


def test_secrets_never_reach_the_logs(sessions, conninfo, caplog):
    secret = new_secret()
    with webhook_receiver(script=[500, "sleep:0.5"]) as receiver:
        box = make_outbox(
            subscriber("chat", receiver.url, EVENTS, secret=secret), timeout_seconds=0.2
        )
        box.attach(sessions)
        with (
            caplog.at_level(logging.DEBUG),
            running_deliveries(sessions, box, conninfo=conninfo),
        ):
            _emit_for_new_item(sessions)
            wait_until(lambda: _statuses(sessions) == {"delivered": 1}, what="delivery")
    assert "failed" in caplog.text  # the failures were logged...
    key = secret.removeprefix("whsec_")
    assert key not in caplog.text  # ...without the secret
    assert key not in repr(box.subscribers)


def test_engine_completion_reaches_the_receiver_through_notify(sessions, conninfo):
    """A phase change committed by another replica's step wakes the deliveries by NOTIFY."""
    secret = new_secret()
    with webhook_receiver() as receiver:
        box = make_outbox(subscriber("chat", receiver.url, EVENTS, secret=secret))
        box.attach(sessions)
        with (
            running_deliveries(sessions, box, conninfo=conninfo, safety_sweep_seconds=300),
            running_manager(sessions, build_registry(Behaviour()), fast_config()) as manager,
        ):
            time.sleep(0.3)  # the startup sweep is over; the next one is 300 s away
            with sessions() as session:
                item_id = create_item(session, ["finish"])
                session.commit()
            manager.notify(item_id)
            wait_until(lambda: receiver.hits() == 1, timeout=10, what="the notification")
            wait_until(lambda: settled(sessions), what="the item")
        (request,) = receiver.snapshot()
    payload = Webhook(secret).verify(request.body, request.headers)
    assert payload["type"] == "work_item.completed"
    assert payload["data"]["work_item_id"] == str(item_id)
    assert payload["data"]["phase"] == "completed"


def test_the_safety_sweep_prunes_old_delivered_rows(sessions, conninfo):
    with webhook_receiver() as receiver:
        box = make_outbox(subscriber("chat", receiver.url, EVENTS), retention_days=1)
        box.attach(sessions)
        with running_deliveries(sessions, box, conninfo=conninfo) as worker:
            _emit_for_new_item(sessions)
            _emit_for_new_item(sessions)
            wait_until(lambda: _statuses(sessions) == {"delivered": 2}, what="deliveries")
            old, _recent = (row.id for row in outbox_rows(sessions))
            with sessions() as session:
                session.execute(
                    sa.text(
                        "UPDATE outbox_deliveries SET delivered_at = now() - interval '2 days' "
                        "WHERE id = :id"
                    ),
                    {"id": old},
                )
                session.commit()
            worker.sweep()
            wait_until(lambda: len(outbox_rows(sessions)) == 1, what="the prune")
    assert [row.id for row in outbox_rows(sessions)] == [_recent]


def test_concurrent_emitters_and_deliveries_lose_nothing(sessions, conninfo):
    with webhook_receiver() as receiver:
        box = make_outbox(subscriber("chat", receiver.url, EVENTS))
        box.attach(sessions)
        with running_deliveries(sessions, box, conninfo=conninfo):
            threads = [
                threading.Thread(target=lambda: [_emit_for_new_item(sessions) for _ in range(10)])
                for _ in range(4)
            ]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            wait_until(lambda: _statuses(sessions) == {"delivered": 40}, what="all 40")
        assert len({request.webhook_id for request in receiver.snapshot()}) == 40
