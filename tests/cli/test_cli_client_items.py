"""`status`, `retry`, `cancel` and `watch` against a running service."""

from __future__ import annotations

import json
import uuid

import pytest
from cli_client_support import (
    api_submit,
    finish,
    module_service,
    run_cli,
    run_cli_together,
    start_cli,
)
from harness import wait_until
from mr_harness import PROJECT


@pytest.fixture(scope="module")
def service(server_url, template_url):
    yield from module_service(server_url, template_url)


def test_status_of_one_item_is_a_readable_table(service):
    item = api_submit(service, package="glibc")
    result = run_cli("status", "--id", item["id"], url=service.url)
    assert result.returncode == 0, result.stderr
    assert item["id"] in result.stdout
    assert "phase" in result.stdout
    assert "active" in result.stdout
    assert PROJECT in result.stdout
    assert item["details"]["source_branch"] in result.stdout
    assert "update kernel.spec" in result.stdout


def test_lists_filter_page_and_resume_from_the_cursor(service):
    package = f"pkg-{uuid.uuid4().hex[:8]}"
    oldest, middle, newest = (api_submit(service, package=package) for _ in range(3))
    cancelled = service.http.post(f"/api/work-items/{middle['id']}/cancel")
    assert cancelled.status_code == 200, cancelled.text

    # The cursor the service hands out for the first two, to resume from in parallel.
    api_page = service.http.get("/api/work-items/mr", params={"package": package, "limit": 2})
    cursor = api_page.json()["next_cursor"]
    table, first_page, rest = run_cli_together(
        ("status", "--type", "mr", "--phase", "cancelled", "--limit", "500"),
        ("status", "--package", package, "--limit", "2", "--json"),
        ("status", "--package", package, "--cursor", cursor, "--json"),
        url=service.url,
    )
    assert table.returncode == 0, table.stderr
    assert middle["id"][:8] in table.stdout  # the list shows short ids (--wide: full ones)
    assert "cancelled" in table.stdout
    assert newest["id"][:8] not in table.stdout
    assert "active" not in table.stdout

    assert first_page.returncode == 0, first_page.stderr
    page = json.loads(first_page.stdout)
    assert [item["id"] for item in page["items"]] == [newest["id"], middle["id"]]
    assert [item["phase"] for item in page["items"]] == ["active", "cancelled"]
    assert page["next_cursor"] == cursor

    assert rest.returncode == 0, rest.stderr
    rest_page = json.loads(rest.stdout)
    assert [item["id"] for item in rest_page["items"]] == [oldest["id"]]
    assert rest_page["next_cursor"] is None


def test_retry_of_an_active_item_is_refused_with_the_reason(service):
    item = api_submit(service)
    result = run_cli("retry", "--id", item["id"], url=service.url)
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr.splitlines() == [
        "error: HTTP 409 Conflict: item is active: only failed or cancelled items can be retried"
    ]


def test_cancel_closing_the_mr_then_retry(service):
    item = api_submit(service)

    def has_mr() -> bool:
        details = service.http.get(f"/api/work-items/{item['id']}").json()["details"]
        return details["mr_iid"] is not None

    wait_until(has_mr, timeout=30, what="the MR")
    cancelled = run_cli("cancel", "--id", item["id"], "--close-mr", url=service.url)
    assert (cancelled.returncode, cancelled.stderr) == (0, "")
    assert cancelled.stdout == f"cancelled {item['id']}: now cancelled\n"
    (merge_request,) = [
        mr
        for mr in service.simulator.merge_requests(PROJECT)
        if mr["source_branch"] == item["details"]["source_branch"]
    ]
    assert merge_request["state"] == "closed"

    retried = run_cli("retry", "--id", item["id"], "--json", url=service.url)
    assert retried.returncode == 0, retried.stderr
    body = json.loads(retried.stdout)
    assert (body["id"], body["phase"], body["attempts"]) == (item["id"], "active", 0)


def test_watch_ends_with_the_items_fate(service):
    # Same content as main: the service completes it with an empty diff.
    unchanged = api_submit(
        service,
        file_actions=[{"action": "update", "file_path": "kernel.spec", "content": "Version: 1\n"}],
    )
    doomed = api_submit(service)
    completing = start_cli("watch", "--id", unchanged["id"], "--interval", "0.2", url=service.url)
    cancelling = start_cli("watch", "--id", doomed["id"], "--interval", "0.2", url=service.url)
    try:
        assert cancelling.stdout is not None
        first = cancelling.stdout.readline()  # the watch is running: the item is still active
        assert "phase=active" in first
        assert service.http.post(f"/api/work-items/{doomed['id']}/cancel").status_code == 200
    finally:
        ended_cancelled, ended_completed = finish(cancelling), finish(completing)
    assert ended_cancelled.returncode == 1, ended_cancelled.stderr
    assert "phase=cancelled" in ended_cancelled.stdout
    assert ended_cancelled.stderr == f"error: item {doomed['id']} ended cancelled\n"

    assert (ended_completed.returncode, ended_completed.stderr) == (0, "")
    assert "phase=completed" in ended_completed.stdout
    assert "empty_diff" in ended_completed.stdout  # the final table shows the details


def test_status_says_why_the_mr_is_not_merged(service):
    item = api_submit(service, package="openssl")

    def blocker():
        answer = service.http.get(f"/api/work-items/{item['id']}")
        return answer.json()["details"].get("merge_blocker")

    wait_until(lambda: blocker() is not None, what="a merge blocker")
    # The simulated project runs no CI: the service waits for a pipeline.
    assert blocker()["code"] == "pipeline_missing"
    result = run_cli("status", "--id", item["id"], url=service.url)
    assert result.returncode == 0, result.stderr
    assert "merge blocker" in result.stdout
    assert "pipeline_missing: no pipeline has run on the MR head" in result.stdout
    assert "since" in result.stdout


def test_an_id_prefix_is_enough_and_resolved_by_the_service(service):
    item = api_submit(service, package="prefix")
    short = item["id"][:8]  # as `status` shows ids
    result = run_cli("status", "--id", short, url=service.url)
    assert result.returncode == 0, result.stderr
    assert item["id"] in result.stdout
    history = run_cli("history", "--id", short, url=service.url)
    assert history.returncode == 0, history.stderr
    missing = run_cli("status", "--id", "ffffffff-f", url=service.url)
    assert missing.returncode == 2
    assert "no item you may read has an id starting with ffffffff-f" in missing.stderr
    bad = run_cli("status", "--id", "xyz", url=service.url)
    assert bad.returncode == 2
    assert "not a work item id" in bad.stderr
