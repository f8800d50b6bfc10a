"""The HTTP contract of work items, through create_app on a real database."""

from __future__ import annotations

import uuid

from api_harness import build_client
from harness import wait_until
from mr_harness import PROJECT

SUBMIT = {
    "project": PROJECT,
    "source_branch": "workqueue/sync-kernel",
    "title": "Sync kernel sources",
    "commit_message": "Sync sources from upstream",
    "labels": ["bot"],
    "file_actions": [{"action": "update", "file_path": "kernel.spec", "content": "Version: 2\n"}],
}


def submit(client, **overrides):
    return client.post("/api/work-items/mr", json={**SUBMIT, **overrides})


def test_submit_creates_then_reports_unchanged_then_updated(client):
    created = submit(client)
    assert created.status_code == 201, created.text
    body = created.json()
    assert body["outcome"] == "created"
    assert body["item_type"] == "mr"
    assert body["caller_identity"] == "dev-user"
    assert body["idempotency_key"] == f"mr:{PROJECT}:workqueue/sync-kernel:1"
    assert body["details"]["project"] == PROJECT
    assert body["details"]["content_hash"].startswith("sha256:")
    for field in (
        "id",
        "phase",
        "actionable",
        "attempts",
        "error",
        "generation",
        "leased_until",
        "created_at",
        "updated_at",
        "dimensions",
    ):
        assert field in body

    again = submit(client)
    assert (again.status_code, again.json()["outcome"]) == (200, "unchanged")
    assert again.json()["id"] == body["id"]
    changed = submit(client, title="Sync kernel sources, take two")
    assert (changed.status_code, changed.json()["outcome"]) == (200, "updated")


def test_submitted_item_gets_its_mr(client, simulator):
    item_id = submit(client).json()["id"]

    def has_mr() -> bool:
        return client.get(f"/api/work-items/{item_id}").json()["details"]["mr_iid"] is not None

    wait_until(has_mr, timeout=30, what="the MR")
    item = client.get(f"/api/work-items/{item_id}").json()
    dimensions = {row["dimension"]: row for row in item["dimensions"]}
    assert dimensions["needs_mr"]["status"] == "false"
    assert dimensions["needs_mr"]["variant"] == ""
    # The periodic empty-diff check is scheduled, not due now.
    assert dimensions["needs_empty_check"]["pending_until"] is not None
    assert item["details"]["mr_url"].endswith(f"/merge_requests/{item['details']['mr_iid']}")
    assert len(simulator.merge_requests(PROJECT, state="opened")) == 1


def test_policy_violation_is_422_naming_the_field_and_stores_nothing(client, simulator):
    bad = submit(
        client,
        file_actions=[
            {"action": "update", "file_path": "ok.txt", "content": "x"},
            {"action": "delete", "file_path": "a/../b"},
        ],
    )
    assert bad.status_code == 422
    (problem,) = bad.json()["detail"]
    assert problem["loc"] == ["body", "file_actions", 1, "file_path"]
    assert client.get("/api/work-items").json()["items"] == []
    assert simulator.request_count() == 0


def test_schema_errors_are_fastapi_shaped_422(client):
    missing = client.post(
        "/api/work-items/mr", json={k: v for k, v in SUBMIT.items() if k != "title"}
    )
    assert missing.status_code == 422
    assert missing.json()["detail"][0]["loc"] == ["body", "title"]
    unknown = submit(client, colour="blue")
    assert unknown.status_code == 422
    assert unknown.json()["detail"][0]["loc"] == ["body", "colour"]
    not_json = client.post(
        "/api/work-items/mr", content=b"{nope", headers={"content-type": "application/json"}
    )
    assert not_json.status_code == 422


def test_oversized_body_is_413(database_url, simulator):
    with build_client(database_url, simulator, max_body_bytes=1000) as small:
        big = submit(small, description="x" * 5000)
        assert big.status_code == 413
        assert "larger than 1000 bytes" in big.json()["detail"]


def test_get_unknown_and_malformed_ids(client):
    assert client.get(f"/api/work-items/{uuid.uuid4()}").status_code == 404
    assert client.get("/api/work-items/not-a-uuid").status_code == 422


def test_lists_filter_and_page_with_an_opaque_cursor(client):
    for n in range(5):
        assert (
            submit(
                client, source_branch=f"workqueue/b{n}", package="kernel" if n % 2 else "glibc"
            ).status_code
            == 201
        )
    first_response = client.get("/api/work-items/mr", params={"limit": 2})
    assert first_response.status_code == 200, first_response.text
    first = first_response.json()
    assert [item["details"]["source_branch"] for item in first["items"]] == [
        "workqueue/b4",
        "workqueue/b3",
    ]
    second = client.get(
        "/api/work-items/mr", params={"limit": 2, "cursor": first["next_cursor"]}
    ).json()
    third = client.get(
        "/api/work-items/mr", params={"limit": 2, "cursor": second["next_cursor"]}
    ).json()
    assert [item["details"]["source_branch"] for item in second["items"] + third["items"]] == [
        "workqueue/b2",
        "workqueue/b1",
        "workqueue/b0",
    ]
    assert third["next_cursor"] is None
    kernel = client.get("/api/work-items/mr", params={"package": "kernel"}).json()["items"]
    assert sorted(item["details"]["source_branch"] for item in kernel) == [
        "workqueue/b1",
        "workqueue/b3",
    ]
    assert client.get("/api/work-items", params={"item_type": "mr", "phase": "failed"}).json() == {
        "items": [],
        "next_cursor": None,
    }
    assert client.get("/api/work-items/mr", params={"limit": 501}).status_code == 422
    bad_cursor = client.get("/api/work-items", params={"cursor": "garbage!"})
    assert bad_cursor.status_code == 422
    assert bad_cursor.json()["detail"][0]["loc"] == ["query", "cursor"]
    assert client.get("/api/work-items", params={"phase": "sleeping"}).status_code == 422


def test_retry_and_cancel_follow_the_phase_rules(client):
    item_id = submit(client).json()["id"]
    refused = client.post(f"/api/work-items/{item_id}/retry")
    assert refused.status_code == 409
    assert "only failed or cancelled" in refused.json()["detail"]

    cancelled = client.post(f"/api/work-items/{item_id}/cancel")
    assert (cancelled.status_code, cancelled.json()["phase"]) == (200, "cancelled")
    assert client.post(f"/api/work-items/{item_id}/cancel").status_code == 409

    retried = client.post(f"/api/work-items/{item_id}/retry")
    assert retried.status_code == 200
    assert (retried.json()["phase"], retried.json()["attempts"]) == ("active", 0)
    assert client.post(f"/api/work-items/{uuid.uuid4()}/retry").status_code == 404


def test_cancel_with_close_mr_is_rejected_for_unknown_fields(client):
    item_id = submit(client).json()["id"]
    assert client.post(f"/api/work-items/{item_id}/cancel", json={"close": True}).status_code == 422


def test_me_hands_out_the_forwarded_token_only_when_present(client):
    assert client.get("/api/work-items/me").status_code == 401
    answer = client.get("/api/work-items/me", headers={"X-Forwarded-Access-Token": "sha256~abc"})
    assert answer.json() == {"token": "sha256~abc"}


def test_health_readiness_metrics_and_docs(client):
    assert client.get("/healthz").json() == {"status": "ok"}
    assert client.get("/readyz").json() == {"status": "ready"}
    submit(client)
    metrics = client.get("/metrics")
    assert metrics.status_code == 200
    assert 'workqueue_items{item_type="mr",phase="active"} 1.0' in metrics.text
    assert 'workqueue_ci_retry_breaker_open{item_type="mr"} 0.0' in metrics.text
    assert "workqueue_items_claimed_total" in metrics.text
    for path in ("/docs", "/redoc", "/openapi.json"):
        assert client.get(path).status_code == 200


def _wait_for_mr(client, item_id):
    wait_until(
        lambda: client.get(f"/api/work-items/{item_id}").json()["details"]["mr_iid"] is not None,
        timeout=30,
        what="the MR",
    )


def test_cancel_leaves_the_mr_open_unless_asked_to_close_it(client, simulator):
    kept = submit(client).json()["id"]
    closed = submit(client, source_branch="workqueue/other").json()["id"]
    _wait_for_mr(client, kept)
    _wait_for_mr(client, closed)
    assert client.post(f"/api/work-items/{kept}/cancel").status_code == 200
    answer = client.post(f"/api/work-items/{closed}/cancel", json={"close_mr": True})
    assert (answer.status_code, answer.json()["phase"]) == (200, "cancelled")
    states = {mr["source_branch"]: mr["state"] for mr in simulator.merge_requests(PROJECT)}
    assert states == {"workqueue/sync-kernel": "opened", "workqueue/other": "closed"}
    iid = client.get(f"/api/work-items/{closed}").json()["details"]["mr_iid"]
    assert any("cancelled" in note["body"] for note in simulator.notes(PROJECT, iid))


def test_gitlab_failure_while_cancelling_is_502_and_changes_nothing(client, simulator):
    item_id = submit(client).json()["id"]
    _wait_for_mr(client, item_id)
    simulator.inject_fault("GET", "/projects/:id/merge_requests/:merge_request_iid", status=503)
    answer = client.post(f"/api/work-items/{item_id}/cancel", json={"close_mr": True})
    assert answer.status_code == 502
    assert client.get(f"/api/work-items/{item_id}").json()["phase"] == "active"


def test_cancel_and_retry_of_a_type_this_replica_does_not_handle(database_url, simulator):
    with build_client(database_url, simulator) as client:
        item_id = submit(client).json()["id"]
    # Another replica shares the database but handles no item types (DDR-25).
    with build_client(database_url, simulator, handled_types={}) as other:
        cancelled = other.post(f"/api/work-items/{item_id}/cancel")
        assert (cancelled.status_code, cancelled.json()["phase"]) == (200, "cancelled")
        retried = other.post(f"/api/work-items/{item_id}/retry")
        assert (retried.status_code, retried.json()["phase"]) == (200, "active")


def test_items_are_found_by_the_start_of_their_id(client):
    ids = [submit(client, source_branch=f"workqueue/p{n}").json()["id"] for n in range(3)]
    for item_id in ids:
        for prefix in (item_id[:8], item_id[:13], item_id[:13].replace("-", ""), item_id.upper()):
            found = client.get("/api/work-items", params={"id_prefix": prefix})
            assert found.status_code == 200, found.text
            assert [item["id"] for item in found.json()["items"]] == [item_id], prefix
    for bad in ("abc", "zzzz", "7d95--8e", "0" * 33):
        refused = client.get("/api/work-items", params={"id_prefix": bad})
        assert refused.status_code == 422, bad
        assert "id_prefix" in str(refused.json()["detail"][0]["loc"])
