"""A local endpoint standing in for Sentry: envelopes posted to /api/<project>/envelope/."""

from __future__ import annotations

import gzip
import http.server
import json
import threading
import time
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any


@dataclass
class SentryReceiver:
    dsn: str
    raw: list[bytes] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, body: bytes) -> None:
        lines = body.split(b"\n")
        # Envelope: a header line, then (item header, payload) pairs.
        items = lines[1:]
        with self.lock:
            self.raw.append(body)
            for header, payload in zip(items[::2], items[1::2], strict=False):
                if header and json.loads(header).get("type") == "event":
                    self.events.append(json.loads(payload))

    def wait_for_event(self, timeout: float = 30) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                if self.events:
                    return self.events[0]
            time.sleep(0.05)
        raise AssertionError(f"no event within {timeout} s ({len(self.raw)} envelopes)")


def _decode(body: bytes, encoding: str | None) -> bytes:
    if encoding == "gzip":
        return gzip.decompress(body)
    if encoding == "deflate":
        return zlib.decompress(body)
    if encoding == "br":
        import brotli  # type: ignore[import-not-found]  # noqa: PLC0415 - only if sent

        return bytes(brotli.decompress(body))
    return body


@contextmanager
def sentry_receiver() -> Iterator[SentryReceiver]:
    receiver: SentryReceiver

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            if self.path.startswith("/api/1/envelope/"):
                receiver.add(_decode(body, self.headers.get("Content-Encoding")))
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"{}")

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    receiver = SentryReceiver(dsn=f"http://public@127.0.0.1:{server.server_port}/1")
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
