"""HTTP requests by method, route template and status, in the app's Prometheus registry.

The route is the template (`/api/work-items/{item_id}`), never the raw path,
so item ids do not become label values; a path no route matches is
`(unmatched)`. Answers written before routing (401 from the authentication
middleware, 413/408 from the body reader) are counted too, which is why
this is the outermost of the app's own middleware. The webhook receiver's
401 rate, a wrong or rotated secret on GitLab's side, is read from here.
"""

from __future__ import annotations

import re
import time
from typing import Any

from fastapi import FastAPI
from prometheus_client import CollectorRegistry, Counter, Histogram
from starlette.routing import compile_path
from starlette.types import ASGIApp, Message, Receive, Scope, Send

UNMATCHED = "(unmatched)"


class HTTPMetrics:
    """Pure ASGI middleware (no body buffering, no task per request)."""

    def __init__(self, app: ASGIApp, *, registry: CollectorRegistry, fastapi: FastAPI) -> None:
        self.app = app
        self._app = fastapi
        self._templates: list[tuple[str, re.Pattern[str]]] | None = None
        self._requests = Counter(
            "workqueue_http_requests",
            "HTTP requests answered, by method, route template and status",
            ["method", "route", "status"],
            registry=registry,
        )
        self._seconds = Histogram(
            "workqueue_http_request_duration_seconds",
            "Time to the end of the answer, by method and route template",
            ["method", "route"],
            registry=registry,
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500  # an exception before any answer is what the server turns into a 500

        async def send_and_remember(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, send_and_remember)
        finally:
            route = self._route(scope)
            method = str(scope["method"])
            self._requests.labels(method, route, str(status)).inc()
            self._seconds.labels(method, route).observe(time.perf_counter() - started)

    def _route(self, scope: Scope) -> str:
        route: Any = scope.get("route")  # set by routing
        path = getattr(route, "path", None)
        if isinstance(path, str):
            return path
        # Answered before routing (a middleware's 401, 413 or 408): match the
        # path against the app's documented templates instead.
        if self._templates is None:
            self._templates = _templates(self._app)
        request_path = str(scope["path"])
        for template, pattern in self._templates:
            if pattern.match(request_path):
                return template
        return UNMATCHED


def _templates(app: FastAPI) -> list[tuple[str, re.Pattern[str]]]:
    """The OpenAPI path templates, literal ones first (`/mr` before `/{item_id}`)."""
    templates = list(app.openapi().get("paths", {}))
    templates.sort(key=lambda template: (template.count("{"), template))
    return [(template, compile_path(template)[0]) for template in templates]
