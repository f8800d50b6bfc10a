"""Attack-review: a GitLab token with a trailing newline (a secret file written by `echo`,
`kubectl create secret --from-file`) makes http.client refuse the PRIVATE-TOKEN header
with `ValueError("Invalid header value b'<token>\\n'")`. That error is not one the
transport classifies and scrubs (requests/python-gitlab errors only), so it reaches the
caller as it is: a submission's GitLab pre-check answers 500 and the app logs the
traceback with the token in it (and would send it to Sentry); in the engine it would be
recorded as the item's error (`_describe`), which the API shows.
Real HTTP, real database, the GitLab simulator."""

from __future__ import annotations

import logging

import pytest
from harness import wait_until
from live_app import live_client
from mr_harness import FILES, PROJECT, TOKEN

from workqueue.api.app import create_app
from workqueue.config import ServiceConfig
from workqueue.gitlab.client import GitLabClient
from workqueue.settings import Settings
from workqueue.types.plugin import InstallContext

SECRET_PART = TOKEN  # what must never be shown
SUBMIT = {
    "project": PROJECT,
    "source_branch": "workqueue/token-leak",
    "title": "t",
    "commit_message": "m",
    "file_actions": [{"action": "update", "file_path": "kernel.spec", "content": "v9\n"}],
}


def test_a_token_with_a_trailing_newline_is_never_shown(database_url, simulator, caplog):
    simulator.create_project(PROJECT, FILES)
    caplog.set_level(logging.INFO)
    config = ServiceConfig.model_validate(
        {
            "processing": {
                "workers": 1,
                "lease_seconds": 3,
                "heartbeat_seconds": 1,
                "backoff_initial_seconds": 0.05,
                "backoff_max_seconds": 0.2,
            },
            "handled_types": {"mr": {"gitlab_url": simulator.url}},
        }
    )
    app = create_app(
        Settings(WORKQUEUE_SERVICE_LOCAL_AUTH_USER="dev-user"),
        config,
        database_url=database_url,
        type_context=InstallContext(
            gitlab_token=TOKEN + "\n",
            gitlab_client_factory=lambda url, token: GitLabClient(url, token, timeout=5),
        ),
    )
    with live_client(app) as client:
        created = client.post("/api/work-items/mr", json=SUBMIT)
        shown = created.text
        if created.status_code in (200, 201):  # the item's error, once the engine ran
            item_id = created.json()["id"]

            def put_down() -> bool:
                """The engine took the item and let go: done, waiting, or failed for good."""
                item = client.get(f"/api/work-items/{item_id}").json()
                return not item["actionable"] and item["leased_until"] is None

            wait_until(put_down, timeout=10, what="the engine to finish with the item")
            shown = client.get(f"/api/work-items/{item_id}").text

    assert SECRET_PART not in shown
    # Fails: the submission's pre-check calls GitLab, the ValueError escapes as a 500, and
    # the app's error log (exc_info) reads "ValueError: Invalid header value
    # b'simulator-token\n'" (Sentry would get the same text).
    assert SECRET_PART not in caplog.text


def test_secrets_read_from_files_lose_their_trailing_newline(monkeypatch):
    monkeypatch.setenv("WORKQUEUE_SERVICE_GITLAB_TOKEN", TOKEN + "\n")
    monkeypatch.setenv("WORKQUEUE_SERVICE_GITLAB_WEBHOOK_SECRET", " hook-secret\r\n")
    settings = Settings()
    assert settings.gitlab_token is not None
    assert settings.gitlab_token.get_secret_value() == TOKEN
    assert settings.gitlab_webhook_secret is not None
    assert settings.gitlab_webhook_secret.get_secret_value() == "hook-secret"


@pytest.mark.parametrize("bad", ["glpat-a\nb", "glpat a", "glpat-\x00", "glpat-é"])
def test_a_token_that_cannot_be_sent_is_refused_without_repeating_it(bad):
    with pytest.raises(ValueError, match="GitLab token") as refused:
        GitLabClient("http://127.0.0.1:9", bad)
    assert bad not in str(refused.value)
