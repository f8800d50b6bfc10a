"""The `notifications:` section fails closed: every problem names its field."""

from __future__ import annotations

import logging

import pytest

from workqueue.config import ConfigError, load_config
from workqueue.queue.outbox.emit import Outbox

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"


def _load(tmp_path, body: str):
    path = tmp_path / "config.yaml"
    path.write_text(body, encoding="utf-8")
    return load_config(path)


def _config(**fields: str) -> str:
    subscriber = {
        "name": "chatops",
        "url": "https://hooks.example.com/workqueue",
        "secret_env": "WQ_TEST_CHATOPS_SECRET",
        "events": "[work_item.completed, work_item.failed]",
    }
    subscriber.update(fields)
    lines = "\n".join(f"      {key}: {value}" for key, value in subscriber.items())
    return "notifications:\n  subscribers:\n    -\n" + lines + "\n  max_age_seconds: 600\n"


@pytest.fixture(autouse=True)
def _secret(monkeypatch):
    monkeypatch.setenv("WQ_TEST_CHATOPS_SECRET", SECRET)


def test_a_valid_section_builds_an_outbox_with_the_secret_resolved(tmp_path):
    config = _load(tmp_path, _config(item_types="[mr, trunk]", projects='["group/**"]'))
    outbox = Outbox.from_config(config.notifications)
    (subscriber,) = outbox.subscribers
    assert subscriber.secret == SECRET
    assert SECRET not in repr(config) + repr(outbox.subscribers)
    assert config.notifications.max_age_seconds == 600
    assert outbox.recipients("work_item.completed", "mr", "group/a/b") == ["chatops"]
    assert outbox.recipients("work_item.completed", "mr", "other/a") == []
    assert outbox.recipients("work_item.completed", "sample", "group/a") == []
    assert outbox.recipients("work_item.cancelled", "mr", "group/a") == []


def test_without_the_section_nothing_is_subscribed(tmp_path):
    assert Outbox.from_config(_load(tmp_path, "{}\n").notifications).subscribers == ()


def test_missing_secret_variable_stops_startup_naming_the_field(tmp_path, monkeypatch):
    monkeypatch.delenv("WQ_TEST_CHATOPS_SECRET")
    with pytest.raises(ConfigError) as caught:
        _load(tmp_path, _config())
    message = str(caught.value)
    assert "notifications.subscribers.0.secret_env" in message
    assert "WQ_TEST_CHATOPS_SECRET is not set" in message


@pytest.mark.parametrize("value", ["plain-password", "whsec_not*base64!"])
def test_a_secret_that_is_not_standard_webhooks_is_refused_without_echoing_it(
    tmp_path, monkeypatch, value
):
    monkeypatch.setenv("WQ_TEST_CHATOPS_SECRET", value)
    with pytest.raises(ConfigError) as caught:
        _load(tmp_path, _config())
    assert "notifications.subscribers.0.secret_env" in str(caught.value)
    assert "whsec_" in str(caught.value)
    assert value not in str(caught.value)


@pytest.mark.parametrize(
    ("fields", "location", "fragment"),
    [
        ({"events": "[work_item.exploded]"}, "events.0", "work_item.completed"),
        ({"events": "[]"}, "events", "at least 1"),
        ({"name": "Chat_Ops"}, "name", "pattern"),
        ({"url": "ftp://hooks.example.com/x"}, "url", "http(s)"),
        ({"url": "https://user:pw@hooks.example.com/x"}, "url", "credentials"),
        ({"projects": '["a/***"]'}, "projects", "`**`"),
        ({"projects": '["{namespace}/**"]'}, "projects", "placeholders"),
        ({"colour": "blue"}, "colour", "Extra inputs"),
    ],
)
def test_each_invalid_field_is_named(tmp_path, fields, location, fragment):
    with pytest.raises(ConfigError) as caught:
        _load(tmp_path, _config(**fields))
    assert f"notifications.subscribers.0.{location}" in str(caught.value)
    assert fragment in str(caught.value)


def test_plain_http_is_allowed_with_a_warning(tmp_path, caplog):
    with caplog.at_level(logging.WARNING):
        _load(tmp_path, _config(url="http://hooks.internal/x"))
    assert "plain http" in caplog.text


def test_subscriber_names_are_unique(tmp_path):
    one = _config().split("subscribers:\n")[1].split("  max_age_seconds")[0]
    body = "notifications:\n  subscribers:\n" + one + one
    with pytest.raises(ConfigError, match="unique: chatops"):
        _load(tmp_path, body)
