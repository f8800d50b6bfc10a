"""What every answer gets on its way out, whichever layer wrote it.

`ServiceApp` runs `AnswerRules.exchange` around the whole stack, the webhook
shortcut and the server-error handler included, so no answer leaves without it:

- **`Cache-Control: no-store`** on every `/api/` answer: `/me` hands out a
  bearer token (RFC 6749 §5.1), and lists, items and errors hold one caller's
  data. The dashboard (`/ui/`) sets its own headers (`ui.browser_guard`).
- **Refusals the sender can read.** An answer sent before the request body
  has arrived (401 without a valid token, 413 over a limit, 400, 429) closes
  the connection, but first reads and throws away what the client still
  sends. Closing a socket with unread data makes the kernel reset the
  connection, and the reset discards the answer the client has not read yet:
  a client that writes its whole body before reading (GitLab's hook sender, a
  plain HTTP library) saw a network error instead of the reason. The answer
  itself is sent first, for clients that read while they write.

  The drain ends with the body, after `DRAIN_BYTES` (for a 413:
  `DRAIN_BYTES` past the path's body limit, or no 413 of an API body, whose
  limit is 16 MiB, could ever be read), at the body time limit, when the
  client leaves, or when it
  sends nothing for a while: `DRAIN_START_SECONDS` for the first bytes (a
  client that writes its whole body has them on the way already),
  `DRAIN_IDLE_SECONDS` between later ones. A client that announced a body it
  is not sending holds the connection no longer than that. Nothing is
  drained for a client that stalled (408), for one waiting for
  `100 Continue` (it sends no body after a final answer), or for a body
  announced beyond what would be drained (it would be reset anyway).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from starlette.types import Message, Receive, Scope, Send

from workqueue.api.middleware.asgi import (
    CLOSE_CONNECTION,
    declared_length,
    has_pending_body,
    header,
    route_path,
)

API_PATHS = ("/api", "/api/")
NO_STORE = (b"cache-control", b"no-store")
DRAIN_BYTES = 16 * 1024 * 1024
DRAIN_START_SECONDS = 0.25
DRAIN_IDLE_SECONDS = 1.0
_TOO_LARGE = 413
_STALLED = 408


class AnswerRules:
    """The rules above, for one application: its body limit per path and body time limit."""

    def __init__(self, *, limit_for: Callable[[str], int], timeout_seconds: float) -> None:
        self.limit_for = limit_for
        self.timeout_seconds = timeout_seconds

    def exchange(self, scope: Scope, receive: Receive, send: Send) -> tuple[Receive, Send]:
        """`receive` and `send` for one HTTP request, with the rules applied."""
        path = route_path(scope)
        api = path == API_PATHS[0] or path.startswith(API_PATHS[1])
        if not api and not has_pending_body(scope):
            return receive, send  # nothing to add, nothing to drain
        return _Exchange(self, scope, receive, send, no_store=api).pair()


class _Exchange:
    """One request's messages: counts the body received, edits and completes the answer."""

    __slots__ = (
        "_drain",
        "_drain_bytes",
        "_receive",
        "_rules",
        "_scope",
        "_send",
        "body_done",
        "no_store",
        "received",
    )

    def __init__(
        self, rules: AnswerRules, scope: Scope, receive: Receive, send: Send, *, no_store: bool
    ) -> None:
        self._rules = rules
        self._scope = scope
        self._receive = receive
        self._send = send
        self.no_store = no_store
        self.body_done = not has_pending_body(scope)
        self.received = 0
        self._drain = False
        self._drain_bytes = DRAIN_BYTES

    def pair(self) -> tuple[Receive, Send]:
        return self.receive, self.send

    async def receive(self) -> Message:
        message = await self._receive()
        if message["type"] == "http.request":
            self.received += len(message.get("body", b""))
            if not message.get("more_body", False):
                self.body_done = True
        elif message["type"] == "http.disconnect":
            self.body_done = True
        return message

    async def send(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            message = self._start(message)
        elif (
            message["type"] == "http.response.body"
            and self._drain
            and not message.get("more_body", False)
        ):
            self._drain = False
            # The answer leaves now; the response (and the connection) ends after the drain.
            await self._send({**message, "more_body": True})
            await self._drain_body()
            message = {"type": "http.response.body", "body": b"", "more_body": False}
        await self._send(message)

    def _start(self, message: Message) -> Message:
        # A new list: layers may hand over a list they share between answers.
        headers = list(message.get("headers", ()))
        if self.no_store:
            headers = [item for item in headers if item[0].lower() != NO_STORE[0]]
            headers.append(NO_STORE)
        if not self.body_done:
            if CLOSE_CONNECTION not in headers:
                headers.append(CLOSE_CONNECTION)  # else the server drains without a bound
            if message["status"] == _TOO_LARGE:
                self._drain_bytes += self._rules.limit_for(route_path(self._scope))
            self._drain = message["status"] != _STALLED and self._drainable()
        return {**message, "headers": headers}

    def _drainable(self) -> bool:
        expect = header(self._scope, b"expect")
        if expect is not None and expect.strip().lower() == "100-continue":
            return False
        return declared_length(self._scope) <= self._drain_bytes

    async def _drain_body(self) -> None:
        budget = self._drain_bytes
        wait = DRAIN_START_SECONDS if self.received == 0 else DRAIN_IDLE_SECONDS
        try:
            async with asyncio.timeout(self._rules.timeout_seconds):
                while not self.body_done and self.received <= budget:
                    await asyncio.wait_for(self.receive(), wait)
                    wait = DRAIN_IDLE_SECONDS
        except TimeoutError:
            pass  # a client this slow is not sending its body: close
