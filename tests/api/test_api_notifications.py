"""Notifications wired by create_app: config to outbox to a subscriber, over real HTTP."""

from __future__ import annotations

from api_harness import build_client
from harness import wait_until
from mr_harness import PROJECT
from outbox_harness import new_secret
from standardwebhooks import Webhook
from webhook_receiver import webhook_receiver

SUBMIT = {
    "project": PROJECT,
    "source_branch": "workqueue/notify-me",
    "title": "Sync kernel sources",
    "commit_message": "Sync sources from upstream",
    "file_actions": [{"action": "update", "file_path": "kernel.spec", "content": "Version: 2\n"}],
}


def test_cancelling_through_the_api_notifies_the_configured_subscriber(
    database_url, simulator, monkeypatch
):
    secret = new_secret()
    monkeypatch.setenv("WQ_TEST_OPS_SECRET", secret)
    with webhook_receiver() as receiver:
        notifications = {
            "subscribers": [
                {
                    "name": "ops",
                    "url": receiver.url,
                    "secret_env": "WQ_TEST_OPS_SECRET",
                    "events": ["work_item.cancelled"],
                    "projects": ["group/**"],
                }
            ]
        }
        with build_client(database_url, simulator, notifications=notifications) as client:
            item_id = client.post("/api/work-items/mr", json=SUBMIT).json()["id"]
            answer = client.post(f"/api/work-items/{item_id}/cancel")
            assert answer.status_code == 200, answer.text
            wait_until(lambda: receiver.hits() == 1, timeout=10, what="the notification")
        (request,) = receiver.snapshot()
    payload = Webhook(secret).verify(request.body, request.headers)
    assert payload["type"] == "work_item.cancelled"
    assert payload["data"] == {
        "work_item_id": item_id,
        "item_type": "mr",
        "phase": "cancelled",
        "project": PROJECT,
    }
