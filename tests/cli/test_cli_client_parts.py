"""The client's pure parts, in process: file flags, content encoding, error answers, URLs."""

from __future__ import annotations

import base64

import httpx
import pytest
from rich.console import Console

from workqueue.cli.client_files import encode_content, plan_file_actions
from workqueue.cli.client_http import (
    ServiceError,
    UsageError,
    service_url,
    token_from_environment,
)
from workqueue.cli.client_render import item_view


def test_file_flags_become_actions_in_flag_order(tmp_path):
    (tmp_path / "a.txt").write_text("text\n")
    (tmp_path / "b:odd.bin").write_bytes(b"\xff\x00")
    planned = plan_file_actions(
        updates=[f"{tmp_path / 'a.txt'}:docs/a.txt"],
        creates=[f"{tmp_path / 'b:odd.bin'}:bin/b.bin"],  # a colon in the local name
        deletes=["old.txt"],
        moves=["from/x:to/x"],
    )
    assert [action.body for action in planned] == [
        {"action": "update", "file_path": "docs/a.txt", "content": "text\n", "encoding": "text"},
        {
            "action": "create",
            "file_path": "bin/b.bin",
            "content": base64.b64encode(b"\xff\x00").decode(),
            "encoding": "base64",
        },
        {"action": "delete", "file_path": "old.txt"},
        {"action": "move", "file_path": "to/x", "previous_path": "from/x"},
    ]
    assert planned[2].origin == "--delete old.txt"


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b"", ("", "text")),
        ("naïve ✓\n".encode(), ("naïve ✓\n", "text")),
        (b"a\0b", (base64.b64encode(b"a\0b").decode(), "base64")),
        (b"\xc3\x28", (base64.b64encode(b"\xc3\x28").decode(), "base64")),
    ],
)
def test_content_is_text_only_when_it_is_utf8_without_nul(data, expected):
    assert encode_content(data) == expected


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        ({"updates": ["no-colon"]}, "--file 'no-colon': expected LOCAL:REPO"),
        ({"creates": [":repo.txt"]}, "--create ':repo.txt': expected LOCAL:REPO"),
        ({"updates": ["local.txt:"]}, "--file 'local.txt:': expected LOCAL:REPO"),
        ({"moves": ["a:b:c"]}, "--move 'a:b:c': expected OLD:NEW with a single colon"),
        ({"moves": ["a:"]}, "--move 'a:': expected OLD:NEW"),
        ({"deletes": [""]}, "--delete needs a repository path"),
    ],
)
def test_malformed_flags_are_usage_errors(flags, message):
    arguments = {"updates": [], "creates": [], "deletes": [], "moves": []} | flags
    with pytest.raises(UsageError) as caught:
        plan_file_actions(**arguments)
    assert str(caught.value).startswith(message)
    assert caught.value.exit_code == 2


def test_a_directory_is_not_readable_content(tmp_path):
    with pytest.raises(UsageError, match=r"cannot read .*: Is a directory"):
        plan_file_actions(updates=[f"{tmp_path}:x"], creates=[], deletes=[], moves=[])


def test_error_answers_become_lines():
    validation = httpx.Response(
        422,
        json={
            "detail": [
                {"loc": ["body", "file_actions", 1, "file_path"], "msg": "blocked", "type": "x"},
                {"loc": ["body", "title"], "msg": "Field required", "type": "missing"},
            ]
        },
    )
    error = ServiceError.from_response(validation)
    assert error.lines() == ["body.file_actions.1.file_path: blocked", "body.title: Field required"]
    hinted = error.with_hints(lambda location: "--delete x" if 1 in location else None)
    assert hinted.lines()[0] == "body.file_actions.1.file_path: blocked (--delete x)"

    conflict = ServiceError.from_response(httpx.Response(409, json={"detail": "item is active"}))
    assert conflict.lines() == ["HTTP 409 Conflict: item is active"]
    page = httpx.Response(502, text="<html>\n<h1>Bad Gateway</h1>\n</html>\n")
    assert ServiceError.from_response(page).lines() == [
        "HTTP 502 Bad Gateway: <html> <h1>Bad Gateway</h1> </html>"
    ]
    assert ServiceError.from_response(httpx.Response(503)).lines() == [
        "HTTP 503 Service Unavailable"
    ]
    odd = ServiceError.from_response(httpx.Response(400, json={"detail": {"code": 7}}))
    assert odd.lines() == ["HTTP 400 Bad Request: {'code': 7}"]


@pytest.mark.parametrize("url", ["ftp://host", "http://", "not a url"])
def test_unusable_service_urls_are_usage_errors(url):
    with pytest.raises(UsageError):
        service_url(url)


@pytest.mark.parametrize("url", [None, "", "  "])
def test_without_a_url_the_client_talks_to_a_local_serve(url):
    # Where `serve` listens with no options: a local trial needs no --url.
    assert service_url(url) == "http://127.0.0.1:8080"


def test_service_url_and_token_are_taken_as_given():
    assert service_url(" https://queue.example.com/prefix ") == "https://queue.example.com/prefix"
    assert token_from_environment({"WORKQUEUE_SERVICE_TOKEN": " abc \n"}) == "abc"
    assert token_from_environment({"WORKQUEUE_SERVICE_TOKEN": ""}) is None
    assert token_from_environment({}) is None


def test_status_shows_each_check_per_variant_with_its_link():
    item = {
        "id": "7d958e0a-0000-4000-8000-000000000001",
        "phase": "active",
        "details": {
            "checks": [
                {
                    "name": "scan",
                    "variant": "",
                    "status": "success",
                    "url": "https://ci.example/scan/1",
                    "updated_at": "2026-12-03T10:00:00+00:00",
                }
            ],
            "post_merge": {
                "merge_commit_sha": "c" * 40,
                "checks": [
                    {
                        "name": "build",
                        "variant": "api",
                        "status": "failed",
                        "url": "https://konflux.example/run/api",
                        "updated_at": "2026-12-03T10:05:00+00:00",
                    },
                    {
                        "name": "build",
                        "variant": "worker",
                        "status": "pending",
                        "url": None,
                        "updated_at": None,
                    },
                ],
            },
        },
    }
    console = Console(width=200, record=True)
    console.print(item_view(item))
    text = console.export_text()
    assert "external checks" in text
    assert "https://konflux.example/run/api" in text
    assert "https://ci.example/scan/1" in text
    [api] = [line for line in text.splitlines() if "api" in line and "failed" in line]
    assert "merge commit" in api
    [worker] = [line for line in text.splitlines() if "worker" in line]
    assert "pending" in worker
    assert "awaited" in worker
    # The post_merge row names the commit; its checks are only in the table.
    assert f"merge_commit_sha={'c' * 40}" in text
    assert "'status'" not in text


class _Listing:
    def __init__(self, items, next_cursor=None):
        self.page = {"items": items, "next_cursor": next_cursor}
        self.asked = []

    def get(self, path, params=None):
        self.asked.append((path, params))
        return self.page


def test_an_ambiguous_id_prefix_lists_the_candidates():
    from workqueue.cli.client import resolve_id  # noqa: PLC0415 - the function under test

    full = "7d958e0a-d030-4e53-8322-8b53e5581b07"
    assert resolve_id(_Listing([]), full) == full  # a whole id asks nothing
    one = _Listing([{"id": full}])
    assert resolve_id(one, "7D958E0A") == full
    assert one.asked == [("/api/work-items", {"id_prefix": "7D958E0A", "limit": 10})]
    two = _Listing(
        [
            {"id": full, "item_type": "mr", "phase": "active"},
            {"id": "7d958e0a-0000-4000-8000-000000000000", "item_type": "trunk", "phase": "failed"},
        ],
        next_cursor="c",
    )
    with pytest.raises(UsageError) as raised:
        resolve_id(two, "7d958e0a")
    message = str(raised.value)
    assert "several items (and more)" in message
    assert full in message
    assert "7d958e0a-0000-4000-8000-000000000000  trunk  failed" in message


def test_status_says_true_and_false_as_the_json_does():
    item = {"id": "x", "phase": "active", "actionable": True, "details": {"auto_merge": False}}
    console = Console(width=100, record=True)
    console.print(item_view(item))
    text = console.export_text()
    assert "True" not in text
    assert "False" not in text
    assert "true" in text
    assert "false" in text


def test_watch_says_when_an_item_waits_for_a_person():
    from workqueue.cli.client import waiting_for_a_person  # noqa: PLC0415

    held = {"phase": "active", "details": {"merge_blocker": {"code": "auto_merge_disabled"}}}
    assert "waits for a person" in waiting_for_a_person(held)
    assert waiting_for_a_person({**held, "phase": "completed"}) is None
    assert waiting_for_a_person({"phase": "active", "details": {}}) is None


@pytest.mark.parametrize("command", ["submit", "status", "retry", "cancel", "watch", "history"])
def test_client_help_fits_80_columns_and_names_the_token_variable(command, monkeypatch):
    from typer.testing import CliRunner  # noqa: PLC0415

    from workqueue.cli.main import app  # noqa: PLC0415

    monkeypatch.setenv("COLUMNS", "80")
    result = CliRunner().invoke(app, [command, "--help"], terminal_width=80)
    assert result.exit_code == 0, result.output
    assert "WORKQUEUE_SERVICE_TOKEN" in result.output
    assert "<str>" not in result.output
    assert "<list[str]>" not in result.output
    assert "…" not in result.output  # nothing cut off
    assert max(len(line) for line in result.output.splitlines()) <= 80
