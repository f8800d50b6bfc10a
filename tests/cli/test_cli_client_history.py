"""`history --id`: an item's audit trail as a readable timeline, over HTTP."""

from __future__ import annotations

import json
import uuid

import pytest
from cli_client_support import LOCAL_USER, api_submit, module_service, run_cli
from harness import wait_until


@pytest.fixture(scope="module")
def service(server_url, template_url):
    yield from module_service(server_url, template_url)


def events(service, item_id: str) -> list[str]:
    answer = service.http.get(f"/api/work-items/{item_id}/history", params={"limit": 500})
    return [entry["event_type"] for entry in answer.json()["items"]]


def test_history_is_a_timeline_of_who_did_what(service):
    item = api_submit(service, package="zlib")
    wait_until(lambda: "merge_blocker_changed" in events(service, item["id"]))
    result = run_cli("history", "--id", item["id"], url=service.url)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert out.index("item_submitted") < out.index("mr_ensured")
    assert LOCAL_USER in out
    assert "system" in out
    # Dimension rows and observed fields read as before → after.
    assert "needs_mr: unset → false" in out
    assert "none → pipeline_missing" in out
    assert "None" not in out


def test_history_as_json_and_unknown_items(service):
    item = api_submit(service, package="zstd")
    wait_until(lambda: "mr_ensured" in events(service, item["id"]))
    result = run_cli("history", "--id", item["id"], "--json", url=service.url)
    assert result.returncode == 0, result.stderr
    answer = json.loads(result.stdout)
    assert answer["next_cursor"] is None
    assert answer["items"][0]["event_type"] == "item_submitted"
    missing = run_cli("history", "--id", str(uuid.uuid4()), url=service.url)
    assert missing.returncode == 1
    assert "404" in missing.stderr
