"""Webhooks skip FastAPI's idle outer layers (`ServiceApp`), and only when those are idle:
any other middleware outside the metrics still sees every delivery, and an unhandled
error is still the JSON 500 of the app's handler. Real HTTP, real database."""

from __future__ import annotations

import asyncio
import json

import pytest
from live_app import live_client
from starlette.applications import Starlette
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from webhook_support import OLD_SECRET, receiver_app

from workqueue.api.app import ServiceApp
from workqueue.api.webhooks import route as webhooks
from workqueue.api.webhooks.batcher import IntakeBatcher

HOOK = json.dumps({"object_kind": "pipeline", "object_attributes": {"id": 1}}).encode()
HEADERS = {"X-Gitlab-Token": OLD_SECRET, "Content-Type": "application/json"}


def service(database_url, gitlab_url) -> ServiceApp:
    app = receiver_app(database_url, gitlab_url)
    assert isinstance(app, ServiceApp)
    return app


class Seen:
    """Outermost middleware: records the paths of the requests it saw."""

    paths: list[str]

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            Seen.paths.append(scope["path"])
        await self.app(scope, receive, send)


def test_a_plain_service_takes_the_shortcut(database_url, simulator):
    app = service(database_url, simulator.url)
    with live_client(app) as client:
        answer = client.post(webhooks.WEBHOOK_PATH, content=HOOK, headers=HEADERS)
        refused = client.post(webhooks.WEBHOOK_PATH, content=HOOK, headers={})

    assert (answer.status_code, answer.json()) == (200, {"status": "accepted"})
    assert answer.headers["content-type"] == "application/json"
    assert (refused.status_code, refused.json()) == (
        401,
        {"detail": "missing or invalid X-Gitlab-Token"},
    )
    assert app._webhook_checked
    assert app._webhook_stack is not None


def test_a_middleware_outside_the_metrics_still_sees_every_delivery(database_url, simulator):
    app = service(database_url, simulator.url)
    app.add_middleware(Seen)
    Seen.paths = []
    with live_client(app) as client:
        answer = client.post(webhooks.WEBHOOK_PATH, content=HOOK, headers=HEADERS)
        assert client.get("/healthz").status_code == 200

    assert (answer.status_code, answer.json()) == (200, {"status": "accepted"})
    assert Seen.paths == [webhooks.WEBHOOK_PATH, "/healthz"]
    assert app._webhook_stack is None


def test_instrumented_starlette_turns_the_shortcut_off(database_url, simulator, monkeypatch):
    """Sentry wraps Starlette.__call__: webhooks must keep passing through it."""
    calls: list[str] = []
    original = Starlette.__call__

    async def instrumented(self: Starlette, scope: Scope, receive: Receive, send: Send) -> None:
        calls.append(scope["type"])
        await original(self, scope, receive, send)

    monkeypatch.setattr(Starlette, "__call__", instrumented)
    app = service(database_url, simulator.url)
    with live_client(app) as client:
        answer = client.post(webhooks.WEBHOOK_PATH, content=HOOK, headers=HEADERS)

    assert answer.status_code == 200
    assert "http" in calls
    assert app._webhook_stack is None


def call_directly(app: ASGIApp, body: bytes) -> tuple[list[Message], BaseException | None]:
    """One webhook through the app's ASGI callable: what it sent, and what it raised."""
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": webhooks.WEBHOOK_PATH,
        "raw_path": webhooks.WEBHOOK_PATH.encode(),
        "root_path": "",
        "query_string": b"",
        "headers": [
            (b"x-gitlab-token", OLD_SECRET.encode()),
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
        ],
        "client": ("127.0.0.1", 1234),
        "server": ("127.0.0.1", 80),
    }
    messages = [{"type": "http.request", "body": body, "more_body": False}]
    sent: list[Message] = []

    async def receive() -> Message:
        return messages.pop(0) if messages else {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        sent.append(message)

    async def run() -> BaseException | None:
        try:
            await app(scope, receive, send)
        except Exception as error:  # what the server would see
            return error
        return None

    return sent, asyncio.run(run())


@pytest.mark.parametrize("outer_middleware", [False, True])
def test_an_unhandled_error_answers_the_apps_json_500(database_url, simulator, outer_middleware):
    """As with the full stack: the app's JSON 500, then the error goes on to the server
    (which logs it and closes the connection)."""

    class Broken(IntakeBatcher):
        async def store(self, delivery):  # noqa: ARG002 - fails whatever it is given
            raise RuntimeError("a bug in storing")

    app = service(database_url, simulator.url)
    if outer_middleware:  # the full stack, for comparison
        app.add_middleware(Seen)
        Seen.paths = []
    with live_client(app):  # the lifespan builds the runtime
        setattr(app.state, webhooks._BATCHER_KEY, Broken(None))  # type: ignore[arg-type]
        sent, raised = call_directly(app, HOOK)

    assert isinstance(raised, RuntimeError)
    assert [message["type"] for message in sent] == ["http.response.start", "http.response.body"]
    assert sent[0]["status"] == 500
    assert json.loads(sent[1]["body"]) == {"detail": "internal server error"}
    assert (app._webhook_stack is None) is outer_middleware
