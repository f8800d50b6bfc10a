"""Sentry: an unhandled error in a request reaches a local Sentry endpoint, without secrets."""

from __future__ import annotations

import subprocess
import sys

import pytest
import sentry_sdk
from live_app import live_client
from sentry_receiver import sentry_receiver

from workqueue.api.app import create_app
from workqueue.config import ServiceConfig
from workqueue.observability import Observability, ObservabilityUnavailableError
from workqueue.settings import Settings

WEBHOOK_SECRET = "webhook-secret-never-sent"
BEARER = "bearer-token-never-sent"
FILE_CONTENT = "file-content-never-sent"


class BoomError(Exception):
    pass


def _boom() -> None:
    raise BoomError("the handler broke")


def test_an_unhandled_500_is_reported_without_secrets_or_body(database_url):
    with sentry_receiver() as receiver:
        settings = Settings(SENTRY_DSN=receiver.dsn)
        app = create_app(settings, ServiceConfig(), database_url=database_url)
        # A route that fails the way a bug would; outside /api/, so no token is needed.
        app.add_api_route("/boom", _boom, methods=["POST"])
        with live_client(app) as client:
            answer = client.post(
                "/boom",
                json={"content": FILE_CONTENT},
                headers={"Authorization": f"Bearer {BEARER}", "X-Gitlab-Token": WEBHOOK_SECRET},
            )
            assert answer.status_code == 500
            assert answer.json() == {"detail": "internal server error"}
            event = receiver.wait_for_event()
        # Shutdown closed the client: nothing is reported any more.
        assert not sentry_sdk.get_client().is_active()
    [exception] = [value for value in event["exception"]["values"] if value["type"] == "BoomError"]
    assert exception["value"] == "the handler broke"
    assert event["release"].startswith("workqueue-service@")
    raw = b"".join(receiver.raw)
    for secret in (WEBHOOK_SECRET, BEARER, FILE_CONTENT):
        assert secret.encode() not in raw, secret
    # Frames carry no local variables (they may hold tokens or file contents).
    for frame in exception["stacktrace"]["frames"]:
        assert "vars" not in frame


def test_without_a_dsn_nothing_starts():
    observability = Observability.start(Settings(SENTRY_DSN=None), {})
    assert observability.reports is None
    assert observability.tracing is None
    assert not sentry_sdk.get_client().is_active()


def test_a_malformed_dsn_is_one_clear_error_that_does_not_echo_it():
    with pytest.raises(ObservabilityUnavailableError) as raised:
        Observability.start(Settings(SENTRY_DSN="ftp://secret-key@sentry.example/1"), {})
    assert str(raised.value).startswith("SENTRY_DSN is not usable: ")
    assert "secret-key" not in str(raised.value)


def test_serve_stops_with_one_line_when_the_extra_is_missing(database_url, tmp_path):
    config = tmp_path / "config.yml"
    config.write_text("{}\n")
    # The extra is absent when `import sentry_sdk` fails, which None in sys.modules causes.
    program = (
        "import sys; sys.modules['sentry_sdk'] = None\n"
        "from workqueue.cli.main import main\n"
        "sys.argv = ['workqueue-service', 'serve', '--no-migrate', '--port', '0']\n"
        "main()\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", program],
        env={
            "PATH": "/usr/bin:/bin",
            "DATABASE_URL": database_url.render_as_string(hide_password=False),
            "WORKQUEUE_SERVICE_CONFIG": str(config),
            "SENTRY_DSN": "http://public@127.0.0.1:9/1",
        },
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 1, result.stderr
    assert result.stderr.strip().splitlines()[-1] == (
        "error: SENTRY_DSN is set but the Sentry SDK is not installed "
        "(pip install 'workqueue-service[sentry]'): import of sentry_sdk halted; "
        "None in sys.modules"
    )
