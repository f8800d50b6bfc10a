"""What people read about items: no `None` for a missing value, no deferral on a finished item.

Many MR lives run through the real service (API, engine, webhooks, the GitLab
simulator); every log record and every stored audit entry of theirs is then
scanned for a Python `None` printed where a value was missing, and every
finished item is checked for a dimension still deferred (`pending_until`).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from api_harness import build_client
from databases import create_database_from, drop_database
from harness import wait_until
from mr_harness import FILES, PROJECT, TOKEN

from workqueue.testing.gitlab_simulator import GitLabSimulator, JobSpec

SECRET = "hook-secret"
PRINTED_NONE = re.compile(r"\bNone\b")


def _submission(branch: str, **overrides: Any) -> dict[str, Any]:
    return {
        "project": PROJECT,
        "source_branch": branch,
        "title": f"Change {branch}",
        "commit_message": f"Change {branch}",
        "file_actions": [{"action": "update", "file_path": "kernel.spec", "content": "V: 2\n"}],
        **overrides,
    }


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for entry in value.values():
            yield from _strings(entry)
    elif isinstance(value, list):
        for entry in value:
            yield from _strings(entry)


class _Recorder(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.name.startswith("workqueue"):  # ours, not the HTTP libraries' debug lines
            self.messages.append(record.getMessage())


@contextmanager
def _recording_logs() -> Iterator[_Recorder]:
    recorder, root = _Recorder(), logging.getLogger()
    level = root.level
    root.addHandler(recorder)
    root.setLevel(logging.DEBUG)
    try:
        yield recorder
    finally:
        root.removeHandler(recorder)
        root.setLevel(level)


@pytest.fixture(scope="module")
def lives(server_url, template_url):
    """Run the MR lives once for the module: (final items, log messages, histories, list)."""
    database_url = create_database_from(server_url, template_url.database)
    try:
        with GitLabSimulator(token=TOKEN) as simulator:
            simulator.create_project(PROJECT, FILES)
            yield _run_lives(database_url, simulator)
            assert simulator.errors == []
    finally:
        drop_database(server_url, database_url)


def _run_lives(database_url: Any, simulator: GitLabSimulator) -> tuple[Any, ...]:
    with (
        _recording_logs() as recorder,
        build_client(database_url, simulator, webhook_secret=SECRET) as client,
    ):
        hook_url = f"{client.base_url}/api/webhooks/gitlab"

        def submit(branch: str, **overrides: Any) -> dict[str, Any]:
            answer = client.post("/api/work-items/mr", json=_submission(branch, **overrides))
            assert answer.status_code == 201, answer.text
            return answer.json()

        def item(body: dict[str, Any]) -> dict[str, Any]:
            return client.get(f"/api/work-items/{body['id']}").json()

        def blocked(body: dict[str, Any], code: str) -> bool:
            blocker = item(body)["details"]["merge_blocker"]
            return blocker is not None and blocker["code"] == code

        def run_pipeline(body: dict[str, Any], status: str) -> None:
            wait_until(lambda: item(body)["details"]["mr_iid"] is not None, what="the MR")
            pipeline = simulator.create_pipeline(
                PROJECT,
                merge_request_iid=item(body)["details"]["mr_iid"],
                jobs=[JobSpec("test", status=status)],
            )
            hook = simulator.pipeline_hook(pipeline)
            assert simulator.send_webhook(hook_url, hook, secret_token=SECRET).status_code == 200

        def ended(body: dict[str, Any]) -> bool:
            return item(body)["phase"] != "active"

        items = {
            "waiting": submit("workqueue/waiting"),  # no pipeline ever
            "held": submit("workqueue/held", auto_merge=False),
            "merged": submit("workqueue/merged"),
            "red": submit("workqueue/red"),
            "empty": submit(
                "workqueue/empty",
                file_actions=[
                    {"action": "update", "file_path": "kernel.spec", "content": "Version: 1\n"}
                ],
            ),
            "refused": submit(
                "workqueue/refused",
                file_actions=[{"action": "create", "file_path": "README.md", "content": "x\n"}],
            ),
            "cancelled": submit("workqueue/cancelled"),
        }
        wait_until(lambda: blocked(items["waiting"], "pipeline_missing"), what="no pipeline")
        run_pipeline(items["held"], "success")
        wait_until(
            lambda: item(items["held"])["details"]["head_pipeline_status"] == "success",
            what="the held item's pipeline",
        )
        wait_until(lambda: blocked(items["held"], "auto_merge_disabled"), what="held back")
        run_pipeline(items["merged"], "success")
        run_pipeline(items["red"], "failed")
        wait_until(lambda: blocked(items["red"], "pipeline_failed"), what="a red pipeline")
        wait_until(lambda: blocked(items["cancelled"], "pipeline_missing"), what="no pipeline")
        cancelled = client.post(
            f"/api/work-items/{items['cancelled']['id']}/cancel", json={"close_mr": True}
        )
        assert cancelled.status_code == 200, cancelled.text
        for name in ("merged", "empty", "refused", "cancelled"):
            wait_until(lambda name=name: ended(items[name]), what=f"{name} to end")
        final = {name: item(body) for name, body in items.items()}
        messages = list(recorder.messages)
        histories = {
            name: client.get(f"/api/work-items/{body['id']}/history").json()["items"]
            for name, body in items.items()
        }
        listed = client.get("/api/work-items", params={"limit": 50}).json()["items"]
    return final, messages, histories, listed


def test_the_lives_end_as_expected(lives):
    final, _, _, _ = lives
    phases = {name: item["phase"] for name, item in final.items()}
    assert phases == {
        "waiting": "active",
        "held": "active",
        "merged": "completed",
        "red": "active",
        "empty": "completed",
        "refused": "failed",
        "cancelled": "cancelled",
    }
    assert final["merged"]["details"]["completion_reason"] == "merged"
    assert final["empty"]["details"]["completion_reason"] == "empty_diff"
    assert "already exists" in final["refused"]["error"]


def test_finished_items_show_no_reason_not_to_merge(lives):
    final, _, _, listed = lives
    # The cancelled item was waiting for a pipeline when it was cancelled.
    finished = {
        name: item for name, item in final.items() if item["phase"] in {"completed", "cancelled"}
    }
    assert "cancelled" in finished
    assert {
        name: item["details"].get("merge_blocker") for name, item in finished.items()
    } == dict.fromkeys(finished)
    assert [
        item["id"]
        for item in listed
        if item["phase"] in {"completed", "cancelled"} and item["details"].get("merge_blocker")
    ] == []


def test_no_log_message_prints_none_for_a_missing_value(lives):
    _, messages, _, _ = lives
    assert any("merge" in message for message in messages)  # the scan saw the service talk
    printed = [message for message in messages if PRINTED_NONE.search(message)]
    assert printed == []


def test_no_audit_entry_prints_none_for_a_missing_value(lives):
    _, _, histories, _ = lives
    assert all(histories.values())
    printed = [
        (name, entry["event_type"], text)
        for name, entries in histories.items()
        for entry in entries
        for text in _strings(entry)
        if PRINTED_NONE.search(text)
    ]
    assert printed == []


def test_merge_blocker_messages_name_what_is_missing(lives):
    final, _, _, _ = lives
    messages = {
        name: item["details"]["merge_blocker"]["message"]
        for name, item in final.items()
        if item["phase"] == "active" and item["details"].get("merge_blocker")
    }
    assert set(messages) == {"waiting", "held", "red"}
    for message in messages.values():
        assert not PRINTED_NONE.search(message)
    # The commit it waits for is named, not left out.
    assert final["waiting"]["details"]["mr_sha"] in messages["waiting"]


def test_finished_items_show_no_pending_dimension(lives):
    final, _, _, listed = lives
    finished = {name for name, item in final.items() if item["phase"] != "active"}
    assert finished == {"merged", "empty", "refused", "cancelled"}
    # They had deferrals while active: the periodic empty-diff check.
    for name in ("merged", "cancelled"):
        assert "needs_empty_check" in {row["dimension"] for row in final[name]["dimensions"]}
    by_id = {item["id"]: item for item in listed}
    for name in finished:
        for body in (final[name], by_id[final[name]["id"]]):  # one item, and the list form
            pending = [row for row in body["dimensions"] if row["pending_until"] is not None]
            assert pending == [], name
    # Active items still have their periodic empty-diff check ahead of them.
    waiting = {row["dimension"]: row for row in final["waiting"]["dimensions"]}
    assert waiting["needs_empty_check"]["pending_until"] is not None
