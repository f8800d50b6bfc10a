"""Hostile request bodies and parameters answer 422 in FastAPI's shape: never a 500, never
a coerced value, never a huge echo."""

from __future__ import annotations

import base64
import json
import uuid

import pytest
from harness import wait_until
from mr_harness import PROJECT

SUBMIT = {
    "project": PROJECT,
    "source_branch": "workqueue/strict-json",
    "title": "Strict JSON",
    "commit_message": "m",
    "file_actions": [{"action": "update", "file_path": "kernel.spec", "content": "Version: 7\n"}],
}
SUBMIT_TEXT = json.dumps(SUBMIT)


def with_title(raw_title: str) -> bytes:
    return SUBMIT_TEXT.replace('"Strict JSON"', raw_title).encode()


HOSTILE_SUBMISSIONS = {
    "NaN": with_title("NaN"),
    "Infinity": with_title("Infinity"),
    "-Infinity": with_title("-Infinity"),
    "overflow": with_title("1e400"),
    "negative overflow": with_title("-1e400"),
    "integer over the digit limit": with_title("1" * 5000),
    "utf-16": SUBMIT_TEXT.encode("utf-16"),
    "utf-16-le without BOM": SUBMIT_TEXT.encode("utf-16-le"),
    "utf-32": SUBMIT_TEXT.encode("utf-32"),
    "utf-8 BOM": b"\xef\xbb\xbf" + SUBMIT_TEXT.encode(),
    "invalid utf-8": SUBMIT_TEXT.encode().replace(b"Strict JSON", b"Strict \xff JSON"),
    "nested 65 deep": with_title("[" * 65 + "]" * 65),
    "nested 5000 deep": with_title("[" * 5000 + "]" * 5000),
    "truncated": SUBMIT_TEXT.encode()[:-7],
    "only whitespace": b"  \n",
}


def assert_json_invalid(answer):
    assert answer.status_code == 422, answer.text
    (error,) = answer.json()["detail"]
    assert error["type"] == "json_invalid"
    assert error["loc"][0] == "body"
    assert isinstance(error["ctx"]["error"], str)


def post_json(client, path, content: bytes):
    return client.post(path, content=content, headers={"content-type": "application/json"})


@pytest.mark.parametrize("name", HOSTILE_SUBMISSIONS)
def test_a_submission_that_is_not_strict_json_is_422_and_stores_nothing(client, name):
    answer = post_json(client, "/api/work-items/mr", HOSTILE_SUBMISSIONS[name])

    assert_json_invalid(answer)
    assert client.get("/api/work-items").json()["items"] == []


@pytest.mark.parametrize(
    "content",
    [
        b'{"close_mr": NaN}',
        b'{"close_mr": 1e400}',
        b'{"close_mr": -Infinity}',
        '{"close_mr": true}'.encode("utf-16"),
        '{"close_mr": true}'.encode("utf-32"),
        b'{"close_mr": tru',
        b'{"close_mr": "\xff"}',
        b"[" * 3000,
    ],
)
def test_a_cancel_body_that_is_not_strict_json_is_422_and_cancels_nothing(client, content):
    item_id = client.post("/api/work-items/mr", json=SUBMIT).json()["id"]

    answer = post_json(client, f"/api/work-items/{item_id}/cancel", content)

    assert_json_invalid(answer)
    assert client.get(f"/api/work-items/{item_id}").json()["phase"] == "active"


@pytest.mark.parametrize("content_type", ["text/plain", "application/octet-stream", None])
def test_bytes_that_are_not_utf8_under_another_content_type_are_422(client, content_type):
    headers = {} if content_type is None else {"content-type": content_type}
    for path in ("/api/work-items/mr", f"/api/work-items/{uuid.uuid4()}/cancel"):
        answer = client.post(path, content=b"\xff\xfe\x00\xc3(" * 500, headers=headers)

        assert answer.status_code == 422, answer.text
        assert answer.json()["detail"][0]["loc"][0] == "body"
        assert len(answer.content) < 2000


def test_a_huge_invalid_field_is_not_echoed_back(client):
    answer = client.post(
        "/api/work-items/mr", json={**SUBMIT, "file_actions": "x" * 1_000_000, "colour": "y" * 5000}
    )

    assert answer.status_code == 422
    assert len(answer.content) < 10_000
    by_field = {tuple(error["loc"]): error for error in answer.json()["detail"]}
    assert by_field["body", "file_actions"]["input"].endswith("(1000000 characters)")
    assert by_field["body", "colour"]["input"].startswith("y" * 200 + "…")


def test_a_validation_error_on_a_lone_surrogate_is_422(client):
    # `\ud800` is valid JSON but not encodable as UTF-8: the echo must not make a 500.
    answer = post_json(
        client,
        "/api/work-items/mr",
        SUBMIT_TEXT.replace("}", ', "\\ud800": "\\udfff"}', 1).encode(),
    )

    assert answer.status_code == 422, answer.text


@pytest.mark.parametrize("close_mr", ["yes", "true", 1, 0, None, [], {}])
def test_close_mr_must_be_a_json_boolean(client, simulator, close_mr):
    item_id = client.post("/api/work-items/mr", json=SUBMIT).json()["id"]
    wait_until(
        lambda: client.get(f"/api/work-items/{item_id}").json()["details"]["mr_iid"] is not None,
        timeout=30,
        what="the MR",
    )

    answer = client.post(f"/api/work-items/{item_id}/cancel", json={"close_mr": close_mr})

    assert answer.status_code == 422, answer.text
    assert answer.json()["detail"][0]["loc"] == ["body", "close_mr"]
    assert client.get(f"/api/work-items/{item_id}").json()["phase"] == "active"
    assert len(simulator.merge_requests(PROJECT, state="opened")) == 1


def cursor_of(payload: object) -> str:
    return base64.urlsafe_b64encode(json.dumps(payload).encode()).decode().rstrip("=")


CRAFTED_CURSORS = {
    "numeric id": cursor_of({"created_at": "2024-01-01T00:00:00+00:00", "id": 5}),
    "list id": cursor_of({"created_at": "2024-01-01T00:00:00+00:00", "id": ["x"]}),
    "object id": cursor_of({"created_at": "2024-01-01T00:00:00+00:00", "id": {}}),
    "numeric created_at": cursor_of({"created_at": 1, "id": str(uuid.uuid4())}),
    "null created_at": cursor_of({"created_at": None, "id": str(uuid.uuid4())}),
    "a list": cursor_of([1, 2]),
    "a string": cursor_of("x"),
    "null": cursor_of(None),
    "nested": base64.urlsafe_b64encode(b"[" * 700).decode(),
    "not base64 json": "%%%",
    "bad uuid": cursor_of({"created_at": "2024-01-01T00:00:00+00:00", "id": "nope"}),
    "bad date": cursor_of({"created_at": "yesterday", "id": str(uuid.uuid4())}),
}


@pytest.mark.parametrize("path", ["/api/work-items", "/api/work-items/mr"])
@pytest.mark.parametrize("name", CRAFTED_CURSORS)
def test_a_crafted_cursor_is_422_on_the_cursor(client, path, name):
    answer = client.get(path, params={"cursor": CRAFTED_CURSORS[name]})

    assert answer.status_code == 422, answer.text
    assert answer.json()["detail"][0]["loc"] == ["query", "cursor"]
