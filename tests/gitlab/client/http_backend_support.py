"""A small recording HTTP/1.1 server for the backend tests (imported by plain name).

Keep-alive, threaded; it records each request as it arrived (method, target, headers in
order, body, the client's port, so connections can be counted) and answers with what
`respond` returns. `stall` holds an answer back; `truncate` promises more body than it
sends and closes the connection.
"""

from __future__ import annotations

import dataclasses
import json
import ssl
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclasses.dataclass(frozen=True)
class Received:
    method: str
    target: str
    headers: tuple[tuple[str, str], ...]
    body: bytes
    port: int


@dataclasses.dataclass
class Answer:
    status: int = 200
    headers: dict[str, str] = dataclasses.field(default_factory=dict)
    body: Any = dataclasses.field(default_factory=lambda: {"id": 1, "ok": True})
    stall: float = 0.0
    truncate: bool = False


Responder = Callable[[Received], Answer]


class RecordingServer:
    def __init__(self, *, tls: ssl.SSLContext | None = None) -> None:
        self.received: list[Received] = []
        self.respond: Responder = lambda _request: Answer()
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        # A client that gave up on a stalled answer leaves a broken pipe: not an error here.
        self._server.handle_error = lambda *_: None  # type: ignore[method-assign]
        if tls is not None:
            self._server.socket = tls.wrap_socket(self._server.socket, server_side=True)
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self.scheme = "https" if tls is not None else "http"

    @property
    def url(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> RecordingServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def clear(self) -> None:
        with self._lock:
            self.received.clear()

    def connections(self) -> set[int]:
        with self._lock:
            return {request.port for request in self.received}

    def _record(self, request: Received) -> None:
        with self._lock:
            self.received.append(request)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # headers and body go out as two writes

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                pass

            def date_time_string(self, timestamp: float | None = None) -> str:  # noqa: ARG002 - the signature overridden
                # One Date for every answer: the tests compare whole answers, and two
                # answers a second apart otherwise differ by their clock alone.
                return "Thu, 01 Jan 2026 00:00:00 GMT"

            def _serve(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                request = Received(
                    self.command,
                    self.path,
                    tuple(self.headers.items()),
                    body,
                    self.client_address[1],
                )
                server._record(request)
                answer = server.respond(request)
                if answer.stall:
                    time.sleep(answer.stall)
                payload = answer.body
                if not isinstance(payload, bytes):
                    payload = json.dumps(payload).encode()
                self.send_response(answer.status)
                headers = {"Content-Type": "application/json", **answer.headers}
                for name, value in headers.items():
                    self.send_header(name, value)
                if answer.truncate:
                    self.send_header("Content-Length", str(len(payload) + 100))
                    self.end_headers()
                    self.wfile.write(payload)
                    self.wfile.flush()
                    self.close_connection = True
                    return
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            do_GET = do_POST = do_PUT = do_DELETE = _serve  # noqa: N815

        return Handler
