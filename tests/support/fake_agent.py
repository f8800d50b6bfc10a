"""A compute-only agent in miniature: an HTTP server that answers `POST /v1/tasks` as
scripted and records every call (headers and body)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Scripted:
    status: int = 200
    body: Any = None
    delay: float = 0.0


@dataclass
class FakeAgent:
    url: str
    calls: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    script: list[Scripted] = field(default_factory=list)
    default: Scripted = field(default_factory=lambda: Scripted(body={"reply": "Done."}))

    def answer(self, *answers: Scripted) -> None:
        self.script.extend(answers)


@contextmanager
def fake_agent() -> Iterator[FakeAgent]:
    lock = threading.Lock()
    agent: FakeAgent | None = None

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("content-length", "0"))
            body = json.loads(self.rfile.read(length) or b"null")
            assert agent is not None
            with lock:
                agent.calls.append(body)
                agent.headers.append({k.lower(): v for k, v in self.headers.items()})
                scripted = agent.script.pop(0) if agent.script else agent.default
            if scripted.delay:
                time.sleep(scripted.delay)
            payload = json.dumps(scripted.body).encode()
            try:
                self.send_response(scripted.status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the service gave up waiting

        def log_message(self, *_: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    agent = FakeAgent(url=f"http://127.0.0.1:{server.server_address[1]}/v1/tasks")
    try:
        yield agent
    finally:
        server.shutdown()
        server.server_close()
