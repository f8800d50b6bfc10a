"""Response headers for every dashboard answer, and the cross-site check of its mutations.

The headers come from an ASGI middleware so that static files and error
pages get them as well. Item content comes from untrusted callers: the
Content-Security-Policy allows scripts from this origin only (no inline
script, no eval), so even a template mistake cannot run a caller's markup.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from fastapi import HTTPException, Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from workqueue.api.middleware.asgi import route_path

UI_PREFIX = "/ui"

CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)
SECURITY_HEADERS: tuple[tuple[bytes, bytes], ...] = (
    (b"content-security-policy", CONTENT_SECURITY_POLICY.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
)
# Pages hold item data for one caller: no shared or browser cache keeps them.
NO_STORE = (b"cache-control", b"no-store")


class DashboardHeaders:
    """Adds the security headers (and `no-store` outside static files) under `/ui`."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        # Under the app's root path (`--root-path`), as the routes see it.
        path = route_path(scope) if scope["type"] == "http" else ""
        if path != UI_PREFIX and not path.startswith(UI_PREFIX + "/"):
            await self.app(scope, receive, send)
            return
        cacheable = path.startswith(UI_PREFIX + "/static/")

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                names = {name for name, _ in SECURITY_HEADERS}
                if not cacheable:
                    names.add(NO_STORE[0])
                headers = [
                    (name, value)
                    for name, value in message.get("headers", [])
                    if name.lower() not in names
                ]
                headers.extend(SECURITY_HEADERS)
                if not cacheable:
                    headers.append(NO_STORE)
                message["headers"] = headers
            await send(message)

        await self.app(scope, receive, with_headers)


def refuse_cross_site(request: Request) -> None:
    """403 unless a mutation comes from a dashboard page of this origin.

    htmx sends `HX-Request`, a header no cross-site form can set and no
    cross-origin script may send without a CORS preflight this service never
    grants. Browsers also say where a request comes from: `Sec-Fetch-Site`
    (all current ones) or at least `Origin`, which must name this host.
    """
    if request.headers.get("hx-request") != "true":
        raise HTTPException(status_code=403, detail="refused: not sent by the dashboard")
    fetch_site = request.headers.get("sec-fetch-site")
    if fetch_site is not None:
        if fetch_site != "same-origin":
            raise HTTPException(status_code=403, detail="refused: cross-site request")
        return
    origin = request.headers.get("origin")
    if origin is not None and urlsplit(origin).netloc != request.headers.get("host"):
        raise HTTPException(status_code=403, detail="refused: cross-site request")
