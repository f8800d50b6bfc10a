"""Authentication before anything else reads the request (ASGI middleware).

Every request under `/api/` must prove its caller from the `Authorization`
header (or be the dev-only local user) before its body is read: a client
without credentials gets 401 at once, whatever it announced or is still
sending. Two routes authenticate differently and are exempt: the webhook
receiver (its `X-Gitlab-Token`) and `/api/work-items/me` (the OAuth proxy's
forwarded token).

The gatekeeper may call an OIDC issuer over HTTP, so it runs in a worker
thread; the caller it returns is kept for the routes (`caller_state`).
"""

from __future__ import annotations

from collections.abc import Collection

from starlette.concurrency import run_in_threadpool
from starlette.types import ASGIApp, Receive, Scope, Send

from workqueue.api.asgi import has_pending_body, header, route_path, send_json
from workqueue.api.caller_state import remember_caller
from workqueue.api.deps import CallerAuthenticationError, Gatekeeper

API_PREFIX = "/api/"


class AuthenticateFirst:
    """401 (with `WWW-Authenticate: Bearer`) for `/api/` requests without a valid caller.

    `exempt` holds the (method, path) pairs that authenticate on their own.
    The gatekeeper is the runtime's (`app.state.runtime`, built by the lifespan).
    """

    def __init__(self, app: ASGIApp, *, exempt: Collection[tuple[str, str]] = ()) -> None:
        self.app = app
        self.exempt = frozenset(exempt)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not self._guards(scope):
            await self.app(scope, receive, send)
            return
        try:
            caller = await run_in_threadpool(
                _gatekeeper(scope).authenticate, header(scope, b"authorization")
            )
        except CallerAuthenticationError as error:
            await send_json(
                send,
                401,
                {"detail": str(error)},
                headers=[(b"www-authenticate", b"Bearer")],
                close=has_pending_body(scope),
            )
            return
        remember_caller(scope, caller)
        await self.app(scope, receive, send)

    def _guards(self, scope: Scope) -> bool:
        path = route_path(scope)
        return path.startswith(API_PREFIX) and (scope["method"], path) not in self.exempt


def _gatekeeper(scope: Scope) -> Gatekeeper:
    gatekeeper: Gatekeeper = scope["app"].state.runtime.gatekeeper
    return gatekeeper
