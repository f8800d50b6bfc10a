"""`GET /api/work-items/{id}/history`: the item's audit trail from the database, oldest first."""

from __future__ import annotations

import uuid

from harness import wait_until
from mr_harness import PROJECT

from workqueue.queue.audit.history import AuditHistory
from workqueue.queue.audit.repository import MAX_HISTORY_PAGE


def submission(branch: str) -> dict[str, object]:
    return {
        "project": PROJECT,
        "source_branch": branch,
        "title": "Sync kernel sources",
        "commit_message": "Sync kernel sources",
        "file_actions": [{"action": "update", "file_path": "kernel.spec", "content": "V: 2\n"}],
    }


def all_entries(client, item_id: str, limit: int) -> list[dict[str, object]]:
    entries: list[dict[str, object]] = []
    cursor = None
    while True:
        params: dict[str, object] = {"limit": limit}
        if cursor:
            params["cursor"] = cursor
        page = client.get(f"/api/work-items/{item_id}/history", params=params)
        assert page.status_code == 200, page.text
        entries += page.json()["items"]
        cursor = page.json()["next_cursor"]
        if cursor is None:
            return entries


def test_history_tells_who_did_what_oldest_first_and_pages(client):
    created = client.post("/api/work-items/mr", json=submission("workqueue/history"))
    assert created.status_code == 201, created.text
    item_id = created.json()["id"]

    def events() -> list[str]:
        return [entry["event_type"] for entry in all_entries(client, item_id, 100)]

    wait_until(lambda: "mr_ensured" in events() and "merge_blocker_changed" in events())
    cancelled = client.post(f"/api/work-items/{item_id}/cancel", json={})
    assert cancelled.status_code == 200
    wait_until(lambda: "item_cancelled" in events())

    entries = all_entries(client, item_id, 100)
    stamps = [entry["timestamp"] for entry in entries]
    assert stamps == sorted(stamps)
    assert entries[0]["event_type"] == "item_submitted"
    assert entries[0]["actor"] == "dev-user"
    assert entries[-1]["event_type"] == "item_cancelled"
    assert {entry["work_item_id"] for entry in entries} == {item_id}
    blocker = next(e for e in entries if e["event_type"] == "merge_blocker_changed")
    assert blocker["details"]["before"] is None
    assert blocker["details"]["after"] == "pipeline_missing"
    # Small pages give the same entries, each once.
    assert all_entries(client, item_id, 2) == entries


def test_unknown_items_bad_cursors_and_big_pages_are_refused(client):
    assert client.get(f"/api/work-items/{uuid.uuid4()}/history").status_code == 404
    created = client.post("/api/work-items/mr", json=submission("workqueue/history-bad"))
    item_id = created.json()["id"]
    bad = client.get(f"/api/work-items/{item_id}/history", params={"cursor": "bm90LWpzb24"})
    assert bad.status_code == 422
    assert bad.json()["detail"][0]["loc"] == ["query", "cursor"]
    too_big = client.get(
        f"/api/work-items/{item_id}/history", params={"limit": MAX_HISTORY_PAGE + 1}
    )
    assert too_big.status_code == 422


def test_the_submission_entry_is_stored_with_the_item(client, monkeypatch):
    # Entries handed to the background writer are dropped here, as a replica killed
    # just after answering would drop them: the submission's must not depend on it.
    monkeypatch.setattr(AuditHistory, "enqueue", lambda *_: None)
    created = client.post("/api/work-items/mr", json=submission("workqueue/history-kept"))
    assert created.status_code == 201, created.text
    entries = all_entries(client, created.json()["id"], 100)
    assert entries[0]["event_type"] == "item_submitted"
    assert entries[0]["details"]["outcome"] == "created"
