"""`api.answers`: no-store on /api/ answers, and which refusals drain how much of the body.
Plain ASGI: an app that answers, a client whose messages are listed."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from workqueue.api.middleware.answers import DRAIN_BYTES, AnswerRules

LIMIT = 1000
CHUNK = b"x" * 100


def scope(path: str, headers: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "type": "http",
        "method": "POST",
        "path": path,
        "headers": [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()],
    }


def answering(
    status: int, headers: list[tuple[bytes, bytes]] | None = None, *, read_first: int = 0
) -> Callable[[dict[str, Any], Any, Any], Awaitable[None]]:
    """An app that reads `read_first` body messages, then answers `status`."""

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        for _ in range(read_first):
            await receive()
        await send({"type": "http.response.start", "status": status, "headers": headers or []})
        await send({"type": "http.response.body", "body": b'{"detail":"no"}'})

    return app


def run(
    app: Any, request: dict[str, Any], body: list[bytes], *, silent_after: int | None = None
) -> tuple[list[dict[str, Any]], int]:
    """Serve one request whose body comes in `body` chunks; (messages sent, chunks taken).
    `silent_after`: the client sends that many chunks, then nothing more (it stalls)."""
    sent: list[dict[str, Any]] = []
    taken = 0

    async def receive() -> dict[str, Any]:
        nonlocal taken
        if silent_after is not None and taken >= silent_after:
            await asyncio.Event().wait()  # never comes
        taken += 1
        more = taken < len(body)
        return {"type": "http.request", "body": body[taken - 1], "more_body": more}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    rules = AnswerRules(limit_for=lambda _path: LIMIT, timeout_seconds=5)

    async def serve() -> None:
        wrapped_receive, wrapped_send = rules.exchange(request, receive, send)
        await app(request, wrapped_receive, wrapped_send)

    asyncio.run(serve())
    return sent, taken


def headers_of(sent: list[dict[str, Any]]) -> list[tuple[bytes, bytes]]:
    return list(sent[0]["headers"])


@pytest.mark.parametrize(
    ("path", "existing", "expected"),
    [
        ("/api/work-items", [], [(b"cache-control", b"no-store")]),
        ("/api", [], [(b"cache-control", b"no-store")]),
        (
            "/api/work-items/me",
            [(b"cache-control", b"max-age=600"), (b"x-a", b"1")],
            [(b"x-a", b"1"), (b"cache-control", b"no-store")],
        ),
        ("/ui/", [(b"cache-control", b"no-store")], [(b"cache-control", b"no-store")]),
        ("/healthz", [], []),
        ("/apiary", [], []),
    ],
)
def test_no_store_on_api_answers_only(path, existing, expected):
    sent, _ = run(answering(200, existing), scope(path), [b""])
    assert headers_of(sent) == expected


def test_an_answer_after_the_whole_body_is_left_alone():
    sent, taken = run(
        answering(201, read_first=3), scope("/ui/x", {"content-length": "300"}), [CHUNK] * 3
    )
    assert headers_of(sent) == []
    assert taken == 3
    assert [message.get("more_body", False) for message in sent[1:]] == [False]


def test_a_refusal_before_the_body_closes_after_draining_it():
    request = scope("/api/webhooks/gitlab", {"content-length": "1000"})
    sent, taken = run(answering(401), request, [CHUNK] * 10)
    assert (b"connection", b"close") in headers_of(sent)
    assert taken == 10
    # The answer leaves before the drain; the response ends after it.
    assert [(m["type"], m.get("body"), m.get("more_body")) for m in sent[1:]] == [
        ("http.response.body", b'{"detail":"no"}', True),
        ("http.response.body", b"", False),
    ]


def test_a_refusal_midway_drains_the_rest():
    request = scope("/api/x", {"transfer-encoding": "chunked"})
    sent, taken = run(answering(413, read_first=4), request, [CHUNK] * 12)
    assert taken == 12
    assert sent[-1] == {"type": "http.response.body", "body": b"", "more_body": False}


@pytest.mark.parametrize(
    ("status", "headers", "drained"),
    [
        (413, {"content-length": str(LIMIT + DRAIN_BYTES)}, True),
        (413, {"content-length": str(LIMIT + DRAIN_BYTES + 1)}, False),  # reset anyway
        (401, {"content-length": str(DRAIN_BYTES)}, True),
        (401, {"content-length": str(DRAIN_BYTES + 1)}, False),  # the limit is a 413's
        (413, {"content-length": "1000", "expect": "100-continue"}, False),  # it sends nothing
        (401, {"content-length": "1000", "expect": "100-Continue "}, False),
    ],
)
def test_what_is_not_drained(status, headers, drained):
    sent, taken = run(answering(status), scope("/api/x", headers), [CHUNK] * 5)
    assert (b"connection", b"close") in headers_of(sent)
    assert taken == (5 if drained else 0)
    assert sent[-1].get("more_body", False) is False


def test_a_stalled_body_is_not_drained():
    request = scope("/api/x", {"content-length": "1000"})
    sent, taken = run(answering(408, read_first=2), request, [CHUNK] * 10)
    assert taken == 2
    assert (b"connection", b"close") in headers_of(sent)


@pytest.mark.parametrize(("status", "bound"), [(413, LIMIT + DRAIN_BYTES), (401, DRAIN_BYTES)])
def test_the_drain_stops_past_its_bound(status, bound):
    big = b"x" * (1024 * 1024)
    chunks = [big] * 40  # 40 MiB, chunked: no length to refuse the drain by
    sent, taken = run(answering(status), scope("/api/x", {"transfer-encoding": "chunked"}), chunks)
    assert taken == bound // len(big) + 1
    assert sent[-1] == {"type": "http.response.body", "body": b"", "more_body": False}


@pytest.mark.parametrize("sent_before_stalling", [0, 3])
def test_a_client_that_stops_sending_is_not_waited_for(sent_before_stalling):
    request = scope("/api/x", {"content-length": "1000"})
    sent, taken = run(answering(401), request, [CHUNK] * 10, silent_after=sent_before_stalling)
    assert taken == sent_before_stalling
    assert sent[-1] == {"type": "http.response.body", "body": b"", "more_body": False}
