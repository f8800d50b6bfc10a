"""HTTP requests by method, route template and status, in the app's Prometheus registry.

The route is the template (`/api/work-items/{item_id}`), never the raw path,
so item ids do not become label values; a path no route matches is
`(unmatched)`. Answers written before routing (401 from the authentication
middleware, 413/408 from the body reader) are counted too, which is why
this is the outermost of the app's own middleware. The webhook receiver's
401 rate, a wrong or rotated secret on GitLab's side, is read from here.
"""

from __future__ import annotations

import time
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram
from starlette.routing import Match, Router
from starlette.types import ASGIApp, Message, Receive, Scope, Send

UNMATCHED = "(unmatched)"


class HTTPMetrics:
    """Pure ASGI middleware (no body buffering, no task per request)."""

    def __init__(self, app: ASGIApp, *, registry: CollectorRegistry, router: Router) -> None:
        self.app = app
        self._router = router
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
        # Routing records the route in the scope; answers given before routing
        # (middleware 401s) are matched here against the same routes.
        route: Any = scope.get("route")
        if route is None:
            for candidate in self._router.routes:
                match, _ = candidate.matches(scope)
                if match is Match.FULL:
                    route = candidate
                    break
        path = getattr(route, "path", None)
        return path if isinstance(path, str) else UNMATCHED
