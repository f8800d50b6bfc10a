"""The HTTP transport: a stdlib threading server on a background thread.

HTTP/1.1 keep-alive is on because python-gitlab reuses one `requests` session;
stopping the server therefore also shuts the open keep-alive sockets down, so no
handler thread outlives `stop()` waiting for a next request that never comes.
"""

from __future__ import annotations

import contextlib
import json
import socket
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from workqueue.testing.gitlab_simulator.application import Application
from workqueue.testing.gitlab_simulator.routing import Response

_IDLE_TIMEOUT_SECONDS = 30


def encode(response: Response) -> tuple[bytes, str]:
    if response.body is None:
        return b"", response.content_type
    if isinstance(response.body, bytes):
        return response.body, response.content_type
    return json.dumps(response.body).encode("utf-8"), response.content_type


class _HttpServer(ThreadingHTTPServer):
    daemon_threads = True
    # Joining handler threads on close would wait for idle keep-alive clients.
    block_on_close = False

    def __init__(self, address: tuple[str, int], app: Application) -> None:
        super().__init__(address, _RequestHandler)
        self.app = app
        self.open_connections: set[socket.socket] = set()
        self.connections_lock = threading.Lock()

    def handle_error(
        self, request: socket.socket | tuple[bytes, socket.socket], client_address: Any
    ) -> None:
        # A client that went away mid-answer (a killed service replica) is not a fault
        # of the simulator: no traceback on stderr for it.
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)

    def close_open_connections(self) -> None:
        with self.connections_lock:
            connections = list(self.open_connections)
        for connection in connections:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)


class _RequestHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = _IDLE_TIMEOUT_SECONDS
    server: _HttpServer

    def setup(self) -> None:
        super().setup()
        # Headers and body go out in separate writes; without TCP_NODELAY the client's
        # delayed ACK adds ~40 ms to every request.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with self.server.connections_lock:
            self.server.open_connections.add(self.connection)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            with self.server.connections_lock:
                self.server.open_connections.discard(self.connection)

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def do_PUT(self) -> None:
        self._dispatch("PUT")

    def do_DELETE(self) -> None:
        self._dispatch("DELETE")

    def do_PATCH(self) -> None:
        self._dispatch("PATCH")

    def _dispatch(self, method: str) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw_body = self.rfile.read(length) if length > 0 else b""
        headers = {key.lower(): value for key, value in self.headers.items()}
        host = self.headers.get("Host") or "{}:{}".format(*self.server.server_address[:2])
        response = self.server.app.handle(method, self.path, headers, raw_body, f"http://{host}")
        if response.disconnect:
            self.close_connection = True
            with contextlib.suppress(OSError):
                self.connection.shutdown(socket.SHUT_RDWR)
            return
        payload, content_type = encode(response)
        self.send_response(response.status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(payload)))
        for name, value in response.headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(payload)

    # The signature is BaseHTTPRequestHandler's, hence the unused and builtin-shadowing names.
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002, ARG002
        # Silence per-request stderr lines; the request log records every call.
        return


class SimulatorServer:
    """Runs an `Application` on 127.0.0.1 (port 0 picks a free port) in a daemon thread."""

    def __init__(self, app: Application, host: str = "127.0.0.1", port: int = 0) -> None:
        self._app = app
        self._host = host
        self._port = port
        self._httpd: _HttpServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def running(self) -> bool:
        return self._httpd is not None

    @property
    def url(self) -> str:
        if self._httpd is None:
            raise RuntimeError("the simulator is not running")
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> None:
        if self._httpd is not None:
            return
        self._httpd = _HttpServer((self._host, self._port), self._app)
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.02},
            name="gitlab-simulator",
            daemon=True,
        )
        self._thread.start()

    def stop(self) -> None:
        if self._httpd is None:
            return
        self._httpd.shutdown()
        self._httpd.close_open_connections()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._httpd = None
        self._thread = None
