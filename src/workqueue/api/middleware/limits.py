"""The one reader of request bodies, as ASGI middleware in front of every route.

- **Bounded**: a body over the limit answers 413, refused before reading when
  Content-Length announces it, as soon as the limit is crossed when it is
  streamed (chunked). Paths may have a smaller limit of their own.
- **Timed**: the whole body must arrive within `timeout_seconds`; a client
  that stalls gets 408 and its connection is closed, so it holds nothing.
- **Checked**: `inspect` (strict JSON for API routes) may refuse the complete
  body with an answer of its own.
- **Replayed**: the app then receives the buffered body as one message, so
  nothing downstream can read past the limit or wait on the client.

Early answers close the connection: the server would otherwise keep draining
whatever the client still sends, without a bound. Before it closes, what the
client still sends is read and thrown away up to a bound (`api.answers`), so
that a client that writes its whole body first still reads the answer.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping

from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from workqueue.api.middleware.asgi import declared_length, route_path, send_json

DEFAULT_MAX_BODY_BYTES = 16 * 1024 * 1024
DEFAULT_BODY_TIMEOUT_SECONDS = 30.0

BodyInspector = Callable[[Scope, bytes], Awaitable[Response | None]]


class BodyTooLargeError(Exception):
    pass


class ClientGoneError(Exception):
    pass


class BodyReader:
    """Buffer each request body within its size and time limits, then hand it to the app."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        max_bytes: int = DEFAULT_MAX_BODY_BYTES,
        path_limits: Mapping[str, int] | None = None,
        timeout_seconds: float = DEFAULT_BODY_TIMEOUT_SECONDS,
        inspect: BodyInspector | None = None,
    ) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.path_limits = dict(path_limits or {})
        self.timeout_seconds = timeout_seconds
        self.inspect = inspect

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.limit_for(route_path(scope))
        if declared_length(scope) > limit:
            await _too_large(send, limit)
            return
        try:
            # asyncio's own timeout: a third of anyio.fail_after's cost per request
            # (no cancel scope bookkeeping), and the server runs on asyncio anyway.
            async with asyncio.timeout(self.timeout_seconds):
                body = await _read_body(receive, limit)
        except TimeoutError:
            detail = f"request body not received within {self.timeout_seconds:g} seconds"
            await send_json(send, 408, {"detail": detail}, close=True)
            return
        except BodyTooLargeError:
            await _too_large(send, limit)
            return
        except ClientGoneError:
            return  # nobody is left to answer
        if self.inspect is not None:
            refusal = await self.inspect(scope, body)
            if refusal is not None:
                await refusal(scope, receive, send)
                return
        await self.app(scope, _replay(body, receive), send)

    def limit_for(self, path: str) -> int:
        return body_limit(path, self.max_bytes, self.path_limits)


def body_limit(path: str, max_bytes: int, path_limits: Mapping[str, int]) -> int:
    """The body limit of `path`: its own when it has one, never above `max_bytes`."""
    return min(max_bytes, path_limits.get(path, max_bytes))


async def _read_body(receive: Receive, limit: int) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientGoneError
        chunk: bytes = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise BodyTooLargeError
        if chunk:
            chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


def _replay(body: bytes, receive: Receive) -> Receive:
    """The buffered body as one message; then the server's own messages (disconnect)."""
    delivered = False

    async def replay() -> Message:
        nonlocal delivered
        if delivered:
            return await receive()
        delivered = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replay


async def _too_large(send: Send, limit: int) -> None:
    await send_json(send, 413, {"detail": f"request body larger than {limit} bytes"}, close=True)
