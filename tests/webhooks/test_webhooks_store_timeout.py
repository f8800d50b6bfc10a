"""A delivery whose store is stuck (behind a lock, on a stalled disk) is answered 503
with Retry-After before GitLab's 10 s timeout, and nothing of it is kept: the
retry is accepted, not taken for a duplicate. Real HTTP, real database."""

from __future__ import annotations

import json
import time

import psycopg
from live_app import live_client
from webhook_support import OLD_SECRET, receiver_app

from workqueue.api import app as app_module
from workqueue.api.webhooks import route as webhooks
from workqueue.db.url import libpq_conninfo

HEADERS = {"X-Gitlab-Token": OLD_SECRET, "Content-Type": "application/json"}
TIMEOUT = 0.5


def _hook(pipeline_id: int) -> bytes:
    body = {"object_kind": "pipeline", "object_attributes": {"id": pipeline_id}}
    return json.dumps(body).encode()


def test_a_store_stuck_behind_a_lock_answers_503_in_time(database_url, simulator, monkeypatch):
    monkeypatch.setattr(app_module, "STORE_TIMEOUT_SECONDS", TIMEOUT)
    with live_client(receiver_app(database_url, simulator.url)) as client:
        assert client.post(webhooks.WEBHOOK_PATH, content=_hook(1), headers=HEADERS).json() == {
            "status": "accepted"
        }
        with psycopg.connect(libpq_conninfo(database_url)) as locker:
            locker.execute("LOCK TABLE received_deliveries IN ACCESS EXCLUSIVE MODE")
            started = time.monotonic()
            stuck = client.post(webhooks.WEBHOOK_PATH, content=_hook(2), headers=HEADERS)
            waited = time.monotonic() - started
            locker.rollback()
        retried = client.post(webhooks.WEBHOOK_PATH, content=_hook(2), headers=HEADERS)

    assert stuck.status_code == 503
    assert stuck.headers["retry-after"]
    assert "detail" in stuck.json()
    assert TIMEOUT * 0.8 <= waited < 5.0  # the timeout, well before GitLab's 10 s
    assert (retried.status_code, retried.json()) == (200, {"status": "accepted"})
