"""HTTP/1.1 over a plain socket, for requests no client library sends: announced bodies
that never arrive, bodies that stall halfway."""

from __future__ import annotations

import json
import socket
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit


@dataclass
class RawResponse:
    status: int
    headers: dict[str, str]
    body: bytes
    seconds: float  # from the end of sending to the complete response
    closed: bool  # the server closed the connection after answering

    def json(self) -> Any:
        return json.loads(self.body)


def send_partial(
    base_url: str,
    method: str,
    path: str,
    *,
    headers: dict[str, str],
    body_part: bytes = b"",
    timeout: float = 10,
) -> RawResponse:
    """Send the request head and `body_part` (maybe less than announced), then read the answer.

    Raises TimeoutError when no complete answer arrives within `timeout`.
    """
    location = urlsplit(base_url)
    with socket.create_connection((location.hostname, location.port), timeout=timeout) as sock:
        head = f"{method} {path} HTTP/1.1\r\nHost: {location.netloc}\r\n"
        head += "".join(f"{name}: {value}\r\n" for name, value in headers.items())
        sock.sendall(head.encode("latin-1") + b"\r\n" + body_part)
        started = time.monotonic()
        received = b""
        while b"\r\n\r\n" not in received:
            received += _recv(sock)
        head_bytes, _, rest = received.partition(b"\r\n\r\n")
        status_line, *header_lines = head_bytes.decode("latin-1").split("\r\n")
        answer_headers = {
            name.strip().lower(): value.strip()
            for name, _, value in (line.partition(":") for line in header_lines)
        }
        length = int(answer_headers.get("content-length", "0"))
        while len(rest) < length:
            rest += _recv(sock)
        seconds = time.monotonic() - started
        # A close arrives at once; the wait is long only so a busy machine cannot fake
        # a connection kept open (every answer here closes unless a test says otherwise).
        sock.settimeout(10)
        try:
            closed = sock.recv(1) == b""
        except TimeoutError:
            closed = False
        return RawResponse(int(status_line.split()[1]), answer_headers, rest, seconds, closed)


def _recv(sock: socket.socket) -> bytes:
    chunk = sock.recv(65536)
    if not chunk:
        raise ConnectionError("the server closed the connection without a complete answer")
    return chunk
