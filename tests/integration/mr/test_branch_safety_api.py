"""A lost push hook, then `POST /api/work-items/{id}/retry` or a resubmission, over HTTP.

The whole service (create_app, its processing, python-gitlab to the simulator):
a person pushes to the bot branch and GitLab's webhook never arrives; neither
the API retry nor a resubmission may push over their commit.
"""

from __future__ import annotations

from typing import Any

import httpx
from api_harness import build_client
from harness import wait_until
from mr_harness import PROJECT

BRANCH = "workqueue/sync-kernel"
COMMITS_ROUTE = "/projects/:id/repository/commits"
SUBMIT = {
    "project": PROJECT,
    "source_branch": BRANCH,
    "title": "Sync kernel sources",
    "commit_message": "Sync sources from upstream",
    "file_actions": [{"action": "update", "file_path": "kernel.spec", "content": "Version: 2\n"}],
}


def item(client: httpx.Client, item_id: str) -> dict[str, Any]:
    response = client.get(f"/api/work-items/{item_id}")
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def wait_for(client: httpx.Client, item_id: str, phase: str) -> dict[str, Any]:
    wait_until(
        lambda: (body := item(client, item_id))["phase"] == phase and not body["actionable"],
        timeout=30,
        what=f"item {item_id} {phase} and idle",
    )
    return item(client, item_id)


def test_retry_and_resubmission_after_a_lost_push_hook_keep_the_persons_commit(
    database_url, simulator
):
    with build_client(database_url, simulator) as client:
        created = client.post("/api/work-items/mr", json=SUBMIT)
        assert created.status_code == 201, created.text
        item_id = created.json()["id"]
        wait_until(lambda: item(client, item_id)["details"]["mr_iid"] is not None, what="the MR")
        wait_for(client, item_id, "active")

        # A person pushes to the bot branch; the push hook is lost.
        theirs = simulator.push(PROJECT, BRANCH, {"kernel.spec": "Version: 2-hotfix\n"})
        simulator.reset_requests()

        cancelled = client.post(f"/api/work-items/{item_id}/cancel")
        assert (cancelled.status_code, cancelled.json()["phase"]) == (200, "cancelled")
        retried = client.post(f"/api/work-items/{item_id}/retry")
        assert retried.status_code == 200, retried.text
        failed = wait_for(client, item_id, "failed")
        assert theirs in failed["error"]
        assert failed["details"]["foreign_head_sha"] == theirs
        assert simulator.branch_head(PROJECT, BRANCH) == theirs

        again = client.post("/api/work-items/mr", json={**SUBMIT, "title": "Take two"})
        assert (again.status_code, again.json()["outcome"]) == (200, "retried")
        failed = wait_for(client, item_id, "failed")
        assert theirs in failed["error"]

        assert simulator.request_count("POST", COMMITS_ROUTE) == 0
        assert simulator.log.writes() == []
        assert simulator.branch_head(PROJECT, BRANCH) == theirs


def test_branch_and_description_rules_answer_422_at_the_field(database_url, simulator):
    cases = [
        ({"source_branch": "feature/login"}, ["body", "source_branch"], "branch_outside_prefix"),
        ({"source_branch": "Workqueue/x"}, ["body", "source_branch"], "branch_outside_prefix"),
        ({"target_branch": BRANCH}, ["body", "source_branch"], "same_branch"),
        ({"description": "Sync.\r\n  /merge\r\n"}, ["body", "description"], "quick_action"),
        ({"description": "/close"}, ["body", "description"], "quick_action"),
    ]
    with build_client(database_url, simulator) as client:
        simulator.reset_requests()
        for overrides, loc, kind in cases:
            answer = client.post("/api/work-items/mr", json={**SUBMIT, **overrides})
            assert answer.status_code == 422, (overrides, answer.text)
            assert [(e["loc"], e["type"]) for e in answer.json()["detail"]] == [(loc, kind)]
        assert client.get("/api/work-items/mr").json()["items"] == []
    assert simulator.request_count() == 0
