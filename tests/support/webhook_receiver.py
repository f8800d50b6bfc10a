"""A real HTTP receiver on localhost for outbound-event tests, run in a thread.

It records every request (headers lowercased, raw body) and answers from a
script: a list of status codes or `"sleep:<seconds>"` (answer 200 late, to
make the sender time out), consumed in order, then `default_status`.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class ReceivedRequest:
    path: str
    headers: dict[str, str]
    body: bytes

    @property
    def json(self) -> Any:
        return json.loads(self.body)

    @property
    def webhook_id(self) -> str:
        return self.headers["webhook-id"]


class WebhookReceiver:
    def __init__(self, script: list[int | str] | None = None, default_status: int = 200) -> None:
        self.requests: list[ReceivedRequest] = []
        self._script = list(script or [])
        self._default = default_status
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", "0"))
                body = self.rfile.read(length)
                with receiver._lock:
                    receiver.requests.append(
                        ReceivedRequest(
                            self.path, {k.lower(): v for k, v in self.headers.items()}, body
                        )
                    )
                    answer = receiver._script.pop(0) if receiver._script else receiver._default
                if isinstance(answer, str) and answer.startswith("sleep:"):
                    time.sleep(float(answer.removeprefix("sleep:")))
                    answer = 200
                self.send_response(int(answer))
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/hook"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def hits(self) -> int:
        with self._lock:
            return len(self.requests)

    def snapshot(self) -> list[ReceivedRequest]:
        with self._lock:
            return list(self.requests)


@contextmanager
def webhook_receiver(
    script: list[int | str] | None = None, default_status: int = 200
) -> Iterator[WebhookReceiver]:
    receiver = WebhookReceiver(script, default_status)
    receiver._thread.start()
    try:
        yield receiver
    finally:
        receiver._server.shutdown()
        receiver._server.server_close()
