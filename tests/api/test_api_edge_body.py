"""The body reader: 413 over the limit however the body comes, 408 for a stalled body (and
the connection released), the webhook route's own 1 MiB limit."""

from __future__ import annotations

import json
import time

from api_harness import build_client
from raw_http import send_partial

SECRET = "edge-secret"
MIB = 1024 * 1024  # the webhook route's limit (API.md)


def chunks(total: int, size: int = 300):
    sent = 0
    while sent < total:
        yield b" " * min(size, total - sent)
        sent += size


def test_a_chunked_body_over_the_limit_is_413(database_url, simulator):
    with build_client(database_url, simulator, max_body_bytes=1000) as client:
        answer = client.post(
            "/api/work-items/mr",
            content=chunks(5000),
            headers={"content-type": "application/json"},
        )
        assert "content-length" not in answer.request.headers  # really chunked

        assert answer.status_code == 413
        assert answer.json() == {"detail": "request body larger than 1000 bytes"}
        assert client.get("/healthz").status_code == 200


def test_a_declared_body_over_the_limit_is_413_before_it_is_read(database_url, simulator):
    with build_client(database_url, simulator, max_body_bytes=1000) as client:
        answer = send_partial(
            str(client.base_url),
            "POST",
            "/api/work-items/mr",
            headers={"Content-Type": "application/json", "Content-Length": "5000"},
            timeout=5,
        )

    assert answer.status == 413
    assert answer.seconds < 2
    assert answer.closed


def test_a_body_that_stalls_is_408_and_its_connection_is_closed(database_url, simulator):
    with build_client(database_url, simulator, body_timeout_seconds=1) as client:
        started = time.monotonic()
        answer = send_partial(
            str(client.base_url),
            "POST",
            "/api/work-items/mr",
            headers={"Content-Type": "application/json", "Content-Length": "100"},
            body_part=b'{"project": "gr',
            timeout=10,
        )
        elapsed = time.monotonic() - started
        # The service is unharmed, and a body that does arrive in time is read.
        assert client.post("/api/work-items/mr", json={}).status_code == 422

    assert answer.status == 408
    assert "within 1 seconds" in answer.json()["detail"]
    assert answer.closed
    assert 0.9 < elapsed < 5


def test_the_webhook_route_has_its_own_1_mib_limit(database_url, simulator):
    headers = {"X-Gitlab-Token": SECRET, "X-Gitlab-Event": "Push Hook"}

    def hook_of_size(size: int) -> bytes:
        start = json.dumps({"object_kind": "push", "pad": ""}).encode()
        return start[:-2] + b"x" * (size - len(start)) + start[-2:]

    with build_client(database_url, simulator, webhook_secret=SECRET) as client:
        assert len(hook_of_size(MIB)) == MIB
        fits = client.post("/api/webhooks/gitlab", content=hook_of_size(MIB), headers=headers)
        over = client.post("/api/webhooks/gitlab", content=hook_of_size(MIB + 1), headers=headers)
        chunked_over = client.post(
            "/api/webhooks/gitlab", content=chunks(MIB + 1, 64 * 1024), headers=headers
        )
        # API routes keep the service-wide limit (16 MiB by default).
        submit = client.post(
            "/api/work-items/mr",
            content=b" " * (2 * MIB) + b"{}",
            headers={"content-type": "application/json"},
        )

    assert (fits.status_code, fits.json()) == (200, {"status": "accepted"})
    assert over.status_code == 413
    assert over.json() == {"detail": f"request body larger than {MIB} bytes"}
    assert chunked_over.status_code == 413
    assert submit.status_code == 422  # read whole, then refused for its content
