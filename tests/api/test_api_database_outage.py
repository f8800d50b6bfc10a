"""While the database cannot be reached, requests that need it are answered 503 with
`Retry-After` (not a 500 with a traceback, not a hang), and normally again after."""

from __future__ import annotations

from pathlib import Path

import pytest
from api_harness import build_client
from tcp_proxy import running_proxy

WEBHOOK_SECRET = "outage-secret"


@pytest.fixture
def proxied_url(database_url):
    """The test database, reached through a proxy the test can cut."""
    socket = Path(database_url.query["host"]) / f".s.PGSQL.{database_url.query['port']}"
    with running_proxy(socket) as proxy:
        yield proxy, database_url.set(host="127.0.0.1", port=proxy.port, query={})


def test_requests_needing_an_unreachable_database_are_503_with_retry_after(
    proxied_url, simulator, caplog
):
    proxy, url = proxied_url
    with build_client(url, simulator, webhook_secret=WEBHOOK_SECRET, process_items=False) as client:
        assert client.get("/api/work-items").status_code == 200
        proxy.cut()
        try:
            listed = client.get("/api/work-items")
            hook = client.post(
                "/api/webhooks/gitlab",
                json={"object_kind": "pipeline", "object_attributes": {"id": 1}},
                headers={"X-Gitlab-Token": WEBHOOK_SECRET, "Idempotency-Key": "outage-1"},
            )
        finally:
            proxy.restore()
        for answer in (listed, hook):
            assert answer.status_code == 503, answer.text
            assert answer.headers["retry-after"] == "5"
            assert answer.json() == {"detail": "database unavailable"}
        assert "Traceback" not in caplog.text
        assert client.get("/api/work-items").status_code == 200
