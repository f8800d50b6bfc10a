"""Helpers for dashboard tests: how htmx posts, and submitting an MR item over the API."""

from __future__ import annotations

from typing import Any

import httpx

# htmx marks its requests; browsers say where a request comes from.
DASHBOARD_POST = {"HX-Request": "true", "Sec-Fetch-Site": "same-origin"}


def submitted(client: httpx.Client, headers: dict[str, str], project: str, **fields: Any) -> str:
    body = {
        "project": project,
        "source_branch": fields.pop("source_branch", "workqueue/sync"),
        "title": fields.pop("title", "Sync kernel sources"),
        "commit_message": "Sync from upstream",
        "file_actions": [{"action": "update", "file_path": "kernel.spec", "content": "v2\n"}],
        **fields,
    }
    answer = client.post("/api/work-items/mr", json=body, headers=headers)
    assert answer.status_code == 201, answer.text
    return str(answer.json()["id"])
