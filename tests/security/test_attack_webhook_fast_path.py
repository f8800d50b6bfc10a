"""Attack-review of the webhook fast path (ServiceApp shortcut, ASGI receiver, body reader):
path, method and header variants must neither store without the secret nor skip a check.
Real HTTP (uvicorn), real database."""

from __future__ import annotations

import socket
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

import sqlalchemy as sa

sys.path.insert(0, str(Path(__file__).parents[1] / "webhooks"))

from webhook_support import OLD_SECRET, webhook_app

HOOK = b'{"object_kind": "pipeline", "object_attributes": {"id": 1}}'


def stored(sessions) -> list[str]:
    with sessions() as session:
        return list(
            session.execute(sa.text("SELECT delivery_key FROM received_deliveries")).scalars()
        )


def raw(base_url: str, request: bytes, timeout: float = 10) -> tuple[int, bytes]:
    """Send `request` bytes as they are; the status and the whole answer."""
    location = urlsplit(base_url)
    with socket.create_connection((location.hostname, location.port), timeout=timeout) as sock:
        sock.sendall(request)
        received = b""
        deadline = time.monotonic() + timeout
        while b"\r\n\r\n" not in received and time.monotonic() < deadline:
            chunk = sock.recv(65536)
            if not chunk:
                break
            received += chunk
        head_bytes, _, body = received.partition(b"\r\n\r\n")
        length = next(
            (
                int(line.split(b":", 1)[1])
                for line in head_bytes.split(b"\r\n")[1:]
                if line.lower().startswith(b"content-length:")
            ),
            None,
        )
        # A kept-alive connection stays open: read the announced body, not until a timeout.
        sock.settimeout(1)
        try:
            while (length is None or len(body) < length) and (chunk := sock.recv(65536)):
                received += chunk
                body += chunk
        except (TimeoutError, ConnectionError):
            pass
    return int(received.split(b" ", 2)[1]), received


def head(method: str, path: str, headers: list[tuple[str, str]], body: bytes) -> bytes:
    lines = [f"{method} {path} HTTP/1.1", "Host: test"]
    lines += [f"{name}: {value}" for name, value in headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


PATH_VARIANTS = [
    "/api/webhooks/gitlab/",
    "//api/webhooks/gitlab",
    "/api/webhooks//gitlab",
    "/api//webhooks/gitlab",
    "/api/webhooks/gitlab%2F",
    "/API/webhooks/gitlab",
    "/api/webhooks/gitlab/.",
    "/api/webhooks/./gitlab",
    "/api/webhooks/x/../gitlab",
]
TOKEN_TRICKS = [
    ["wrong", OLD_SECRET],  # the first value counts, in every layer
    ["", OLD_SECRET],
    [f"{OLD_SECRET}, wrong"],
    [f" {OLD_SECRET}x"],
    [OLD_SECRET.upper()],
]


def with_length(headers: list[tuple[str, str]]) -> list[tuple[str, str]]:
    return [*headers, ("Content-Length", str(len(HOOK)))]


def test_no_variant_of_path_method_or_token_stores_without_the_secret(
    database_url, simulator, sessions
):
    with webhook_app(database_url, simulator.url) as service:
        answers = {
            ("path", path): raw(service.base_url, head("POST", path, with_length([]), HOOK))
            for path in PATH_VARIANTS
        }
        answers |= {
            ("tokens", repr(tokens)): raw(
                service.base_url,
                head(
                    "POST",
                    "/api/webhooks/gitlab",
                    with_length([("X-Gitlab-Token", token) for token in tokens]),
                    HOOK,
                ),
            )
            for tokens in TOKEN_TRICKS
        }
    statuses = {key: status for key, (status, _) in answers.items()}
    assert {key: status for key, status in statuses.items() if status == 200} == {}
    assert {status for (kind, _), status in statuses.items() if kind == "tokens"} == {401}
    assert stored(sessions) == []


def test_other_methods_with_the_secret_store_nothing(database_url, simulator, sessions):
    token = [("X-Gitlab-Token", OLD_SECRET)]
    with webhook_app(database_url, simulator.url) as service:
        answers = {
            method: raw(
                service.base_url, head(method, "/api/webhooks/gitlab", with_length(token), HOOK)
            )
            for method in ("post", "Post", "PUT", "PATCH", "GET", "DELETE")
        }
    assert {method: status for method, (status, _) in answers.items() if status < 400} == {}
    assert stored(sessions) == []


def test_encoded_paths_and_queries_still_check_the_secret(database_url, simulator, sessions):
    token = [("X-Gitlab-Token", OLD_SECRET)]
    with webhook_app(database_url, simulator.url) as service:
        answers = [
            (
                raw(service.base_url, head("POST", path, with_length([]), HOOK))[0],
                raw(service.base_url, head("POST", path, with_length(token), HOOK))[0],
            )
            for path in ("/api/webhooks/%67itlab", "/api/webhooks/gitlab?x=1")
        ]
    assert answers == [(401, 200), (401, 200)]
    assert len(stored(sessions)) == 1  # the same body twice: the second is a duplicate


def test_header_name_case_is_irrelevant(database_url, simulator, sessions):
    with webhook_app(database_url, simulator.url) as service:
        status, answer = raw(
            service.base_url,
            head(
                "POST",
                "/api/webhooks/gitlab",
                [("x-GITLAB-token", OLD_SECRET), ("Content-Length", str(len(HOOK)))],
                HOOK,
            ),
        )
    assert status == 200, answer


def test_a_chunked_body_over_the_limit_is_413_and_stores_nothing(database_url, simulator, sessions):
    piece = b"x" * 65536
    pieces = [b'{"object_kind":"pipeline","pad":"', *([piece] * 20)]
    # No final chunk: the limit must answer before the body ends.
    body = b"".join(b"%x\r\n%s\r\n" % (len(part), part) for part in pieces)
    with webhook_app(database_url, simulator.url) as service:
        status, answer = raw(
            service.base_url,
            head(
                "POST",
                "/api/webhooks/gitlab",
                [("X-Gitlab-Token", OLD_SECRET), ("Transfer-Encoding", "chunked")],
                body,
            ),
        )
    assert status == 413, answer[:300]
    assert stored(sessions) == []


def test_a_stalled_body_is_408(database_url, simulator, sessions):
    with webhook_app(database_url, simulator.url, body_timeout_seconds=0.5) as service:
        status, answer = raw(
            service.base_url,
            head(
                "POST",
                "/api/webhooks/gitlab",
                [("X-Gitlab-Token", OLD_SECRET), ("Content-Length", str(len(HOOK)))],
                HOOK[:10],
            ),
        )
    assert status == 408, answer
    assert b'{"detail":"request body not received within 0.5 seconds"}' in answer
    assert stored(sessions) == []


def test_the_shortcut_still_counts_the_request(database_url, simulator, sessions):
    with webhook_app(database_url, simulator.url) as service:
        raw(
            service.base_url,
            head(
                "POST",
                "/api/webhooks/gitlab",
                [("X-Gitlab-Token", OLD_SECRET), ("Content-Length", str(len(HOOK)))],
                HOOK,
            ),
        )
        raw(
            service.base_url,
            head("POST", "/api/webhooks/gitlab", [("Content-Length", str(len(HOOK)))], HOOK),
        )
        assert service.app._webhook_stack is not None
        _, metrics = raw(service.base_url, head("GET", "/metrics", [], b""))
    text = metrics.decode()
    assert 'route="/api/webhooks/gitlab",status="200"' in text
    assert 'route="/api/webhooks/gitlab",status="401"' in text
