"""Plain-ASGI helpers for the middleware that runs before any route (auth, body reader)."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable

from starlette.types import Scope, Send

CLOSE_CONNECTION = (b"connection", b"close")
_MAX_LENGTH_DIGITS = 18  # more is over any limit (and int() of it costs)


def header(scope: Scope, name: bytes) -> str | None:
    """The first value of header `name` (lower case), decoded as Starlette does (latin-1)."""
    for key, value in scope.get("headers", ()):
        if key == name:
            return bytes(value).decode("latin-1")
    return None


def route_path(scope: Scope) -> str:
    """The path the router matches: `path` without the `root_path` a proxy mounted us under."""
    path: str = scope["path"]
    root: str = scope.get("root_path", "")
    if root and path.startswith(root):
        return path[len(root) :] or "/"
    return path


def declared_length(scope: Scope) -> int:
    """The `Content-Length` the client announced; 0 when absent or malformed (which the
    server itself refuses)."""
    value = (header(scope, b"content-length") or "").strip()
    if not (value.isascii() and value.isdigit()):
        return 0
    return int(value) if len(value) <= _MAX_LENGTH_DIGITS else sys.maxsize


def has_pending_body(scope: Scope) -> bool:
    """Whether the client announced a body (which an early answer leaves unread)."""
    length = header(scope, b"content-length")
    if length is not None and length.strip() not in ("", "0"):
        return True
    return header(scope, b"transfer-encoding") is not None


async def send_json(
    send: Send,
    status: int,
    content: object,
    *,
    headers: Iterable[tuple[bytes, bytes]] = (),
    close: bool = False,
) -> None:
    """Answer with a JSON body; `close` ends the connection afterwards.

    Closing matters when the body was not (fully) read: otherwise the server
    keeps the connection and drains whatever the client still sends.
    """
    body = json.dumps(content, separators=(",", ":")).encode()
    all_headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        *headers,
    ]
    if close:
        all_headers.append(CLOSE_CONNECTION)
    await send({"type": "http.response.start", "status": status, "headers": all_headers})
    await send({"type": "http.response.body", "body": body})
