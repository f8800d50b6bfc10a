"""The `webhooks:` section fails closed: every problem stops startup and names its entry,
never the secret; a valid section gives each secret its projects."""

from __future__ import annotations

import logging
import os
import subprocess
import sys

import pytest

from workqueue.api.webhooks.secrets import WebhookSecrets
from workqueue.config import ConfigError, load_config
from workqueue.settings import Settings

TEAM_ENV = "WQ_TEST_HOOK_SECRET_TEAM"
OPS_ENV = "WQ_TEST_HOOK_SECRET_OPS"
TEAM_SECRET = "s3cret-of-the-team-0123456789"
OPS_SECRET = "ops-secret-9876543210"


def _load(tmp_path, body: str):
    path = tmp_path / "config.yaml"
    path.write_text(body, encoding="utf-8")
    return load_config(path)


def _section(*entries: str) -> str:
    return "webhooks:\n  secrets:\n" + "".join(entries)


def _entry(projects: str = '["team/**"]', secret_env: str = TEAM_ENV, **extra: str) -> str:
    lines = [f"    - projects: {projects}", f"      secret_env: {secret_env}"]
    lines += [f"      {key}: {value}" for key, value in extra.items()]
    return "\n".join(lines) + "\n"


@pytest.fixture(autouse=True)
def _secrets(monkeypatch):
    monkeypatch.setenv(TEAM_ENV, TEAM_SECRET)
    monkeypatch.setenv(OPS_ENV, f"  {OPS_SECRET}\n")  # as a secret file leaves it


def test_a_valid_section_gives_each_secret_its_projects(tmp_path):
    config = _load(tmp_path, _section(_entry(), _entry('["ops/tools", "ops/ci/*"]', OPS_ENV)))
    secrets = WebhookSecrets.from_settings(Settings(), config.webhooks)

    team, ops = secrets.scope(TEAM_SECRET), secrets.scope(OPS_SECRET)
    assert team is not None
    assert ops is not None
    assert (team.covers("team/app"), team.covers("ops/tools")) == (True, False)
    assert (ops.covers("ops/ci/runner"), ops.covers("ops/ci/a/b")) == (True, False)
    assert secrets.scope(f"  {OPS_SECRET}\n") is None  # surrounding whitespace is not sent
    assert TEAM_SECRET not in repr(config) + repr(secrets)


def test_the_legacy_variable_keeps_covering_every_project(tmp_path):
    config = _load(tmp_path, _section(_entry()))
    settings = Settings(WORKQUEUE_SERVICE_GITLAB_WEBHOOK_SECRET=" old , new ")
    secrets = WebhookSecrets.from_settings(settings, config.webhooks)

    for token in ("old", "new"):
        scope = secrets.scope(token)
        assert scope is not None
        assert scope.every_project
        assert scope.covers("victim/prod")
    assert len(secrets) == 3


def test_without_any_secret_every_delivery_is_refused_with_a_warning(tmp_path, caplog):
    with caplog.at_level(logging.WARNING):
        secrets = WebhookSecrets.from_settings(Settings(), _load(tmp_path, "{}\n").webhooks)
    assert not secrets
    assert secrets.scope("") is None
    assert "webhooks.secrets is empty" in caplog.text


@pytest.mark.parametrize("value", [None, "", "   \n"])
def test_an_unset_or_empty_secret_variable_stops_startup_naming_the_entry(
    tmp_path, monkeypatch, value
):
    if value is None:
        monkeypatch.delenv(OPS_ENV)
    else:
        monkeypatch.setenv(OPS_ENV, value)
    with pytest.raises(ConfigError) as caught:
        _load(tmp_path, _section(_entry(), _entry('["ops/**"]', OPS_ENV)))
    message = str(caught.value)
    assert "webhooks.secrets.1.secret_env" in message
    assert f"environment variable {OPS_ENV} is {'not set' if value is None else 'empty'}" in (
        message
    )


@pytest.mark.parametrize(
    ("entry", "location", "fragment"),
    [
        (_entry("[]"), "projects", "at least 1"),
        (_entry('""'), "projects", "valid tuple"),
        (_entry('["team/***"]'), "projects", "`**`"),
        (_entry('["{project_path}"]'), "projects", "placeholders"),
        (_entry('[" team/app"]'), "projects", "spaces"),
        (_entry('["team/app"]', "not-a-name"), "secret_env", "not an environment variable"),
        (_entry(colour="blue"), "colour", "Extra inputs"),
        ("    - projects: [team/app]\n", "secret_env", "Field required"),
        ("    - secret_env: " + TEAM_ENV + "\n", "projects", "Field required"),
    ],
)
def test_each_invalid_entry_is_named(tmp_path, entry, location, fragment):
    with pytest.raises(ConfigError) as caught:
        _load(tmp_path, _section(entry))
    assert f"webhooks.secrets.0.{location}" in str(caught.value)
    assert fragment in str(caught.value)
    assert TEAM_SECRET not in str(caught.value)


def test_an_unknown_key_in_the_section_is_refused(tmp_path):
    with pytest.raises(ConfigError, match=r"webhooks\.secret: Extra inputs"):
        _load(tmp_path, "webhooks:\n  secret: []\n")


def test_the_service_refuses_to_start_naming_the_entry(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text(_section(_entry(), _entry('["ops/**"]', OPS_ENV)), encoding="utf-8")
    environment = {key: value for key, value in os.environ.items() if key != OPS_ENV}
    environment.update(
        WORKQUEUE_SERVICE_CONFIG=str(path),
        # Never reached: the file is validated before anything touches the database.
        DATABASE_URL="postgresql://nobody@127.0.0.1:9/none",
    )
    result = subprocess.run(
        [sys.executable, "-m", "workqueue", "serve"],
        capture_output=True,
        text=True,
        env=environment,
        timeout=60,
        check=False,
    )

    assert result.returncode == 2
    assert "webhooks.secrets.1.secret_env" in result.stderr
    assert f"{OPS_ENV} is not set" in result.stderr
