"""Hostile webhook bodies that concern an active item: 400 and nothing stored, never a 500."""

from __future__ import annotations

import json

import httpx
import pytest
from webhook_support import OLD_SECRET, actionable, deliveries, make_item, pending


@pytest.fixture
def item(sessions, service, world):
    return make_item(
        sessions,
        service.runtime.registry,
        project=world.project_path,
        source_branch=world.branch,
        mr_iid=world.iid,
        mr_sha=world.sha,
        head_pipeline_id=world.pipeline_id,
    )


def hook_text(simulator, world) -> str:
    return json.dumps(simulator.merge_request_hook(world.project_id, world.iid))


def with_field(text: str, raw_value: str) -> bytes:
    """The hook with one more top-level field, written as given (not valid for json.dumps)."""
    return (text[:-1] + f', "extra": {raw_value}}}').encode()


def post(service, content: bytes) -> httpx.Response:
    headers = {"X-Gitlab-Token": OLD_SECRET, "X-Gitlab-Event": "Merge Request Hook"}
    return httpx.post(service.url, content=content, headers=headers, timeout=10)


@pytest.mark.parametrize(
    "raw_value",
    ["1e400", "-1e400", "NaN", "Infinity", "[" * 600 + "]" * 600, '{"a":' * 600 + "1" + "}" * 600],
)
def test_a_hostile_value_in_a_hook_for_an_active_item_is_400(
    simulator, service, world, item, sessions, raw_value
):
    answer = post(service, with_field(hook_text(simulator, world), raw_value))

    assert answer.status_code == 400, answer.text
    assert answer.json() == {"detail": "the body must be a JSON object"}
    assert pending(sessions) == []
    assert deliveries(sessions) == []
    assert not actionable(sessions, item)


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-32"])
def test_a_hook_in_another_encoding_than_utf8_is_400(
    simulator, service, world, item, sessions, encoding
):
    answer = post(service, hook_text(simulator, world).encode(encoding))

    assert answer.status_code == 400
    assert pending(sessions) == []


def test_the_same_hook_in_strict_json_is_accepted(simulator, service, world, item, sessions):
    # The control: nesting within the limit and large finite numbers are fine.
    text = with_field(hook_text(simulator, world), "[" * 30 + "1e308" + "]" * 30)

    answer = post(service, text)

    assert (answer.status_code, answer.json()) == (200, {"status": "accepted"})
    assert [event[0] for event in pending(sessions)] == [item]
