"""Authentication before anything else reads the request (ASGI middleware).

Every request under `/api/` must prove its caller from the `Authorization`
header (or be the dev-only local user) before its body is read: a client
without credentials gets 401 at once, whatever it announced or is still
sending. Two routes authenticate differently and are exempt: the webhook
receiver (its `X-Gitlab-Token`) and `/api/work-items/me` (the OAuth proxy's
forwarded token).

Before that, on every path, a credential header sent twice is refused
(`OneOfEachCredential`): which of two tokens counts would otherwise be up to
each layer that reads them. And every check runs within the client address's
budget of failed authentications (`authenticate_request`, `api.failed_authentications`).

The gatekeeper may call an OIDC issuer over HTTP, so it runs in a worker
thread; the caller it returns is kept for the routes (`caller_state`).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping

from starlette.concurrency import run_in_threadpool
from starlette.types import ASGIApp, Receive, Scope, Send

from workqueue.api.caller_state import Caller, remember_caller
from workqueue.api.deps import CallerAuthenticationError, Gatekeeper
from workqueue.api.middleware.asgi import has_pending_body, header, route_path, send_json
from workqueue.api.middleware.failed_authentications import (
    FailedAuthentications,
    TooManyFailedAuthenticationsError,
    client_address,
)
from workqueue.api.webhooks.route import WEBHOOK_PATH

API_PREFIX = "/api/"
FAILED_AUTHENTICATIONS_KEY = "failed_authentications"  # app.state attribute of the budget

# Header -> the answer when it comes twice. A webhook's token is refused as any
# token that is not exactly the secret is (401, as GitLab's hook log shows it).
_BEARER_HEADERS = {
    b"authorization": "more than one Authorization header",
    b"x-forwarded-access-token": "more than one X-Forwarded-Access-Token header",
}
_WEBHOOK_TOKEN = b"x-gitlab-token"
_WEBHOOK_TOKEN_TWICE = "more than one X-Gitlab-Token header"  # noqa: S105 - a message


class OneOfEachCredential:
    """400 when `Authorization` or `X-Forwarded-Access-Token` comes more than once;
    401 for a webhook delivery with more than one `X-Gitlab-Token`."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            refusal = ambiguous_credential(scope)
            if refusal is not None:
                status, detail = refusal
                await send_json(send, status, {"detail": detail}, close=has_pending_body(scope))
                return
        await self.app(scope, receive, send)


def ambiguous_credential(scope: Scope) -> tuple[int, str] | None:
    """The refusal of a request that sends one credential header more than once, or None."""
    seen: set[bytes] = set()
    webhook_tokens = 0
    for name, _ in scope.get("headers", ()):
        if name in _BEARER_HEADERS:
            if name in seen:
                return 400, _BEARER_HEADERS[name]
            seen.add(name)
        elif name == _WEBHOOK_TOKEN:
            webhook_tokens += 1
    if webhook_tokens > 1 and scope["method"] == "POST" and route_path(scope) == WEBHOOK_PATH:
        return 401, _WEBHOOK_TOKEN_TWICE
    return None


class AuthenticateFirst:
    """401 (with `WWW-Authenticate: Bearer`) for `/api/` requests without a valid caller,
    429 (with `Retry-After`) for an address over its budget of failed authentications.

    `exempt` holds the (method, path) pairs that authenticate on their own.
    `alternatives` maps a path to a check of another credential a sender that
    cannot set headers may use instead of a bearer token (Tekton's events
    secret): without an `Authorization` header, a request passing it goes on
    with no caller; the route must check it again.
    The gatekeeper is the runtime's (`app.state.runtime`, built by the lifespan).
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        exempt: Collection[tuple[str, str]] = (),
        alternatives: Mapping[str, Callable[[Scope], bool]] | None = None,
    ) -> None:
        self.app = app
        self.exempt = frozenset(exempt)
        self.alternatives = dict(alternatives or {})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not self._guards(scope):
            await self.app(scope, receive, send)
            return
        alternative = self.alternatives.get(route_path(scope).rstrip("/"))
        if (
            alternative is not None
            and header(scope, b"authorization") is None
            and alternative(scope)
        ):
            await self.app(scope, receive, send)
            return
        try:
            caller = await run_in_threadpool(
                authenticate_request, scope, _gatekeeper(scope), header(scope, b"authorization")
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
        except TooManyFailedAuthenticationsError as error:
            await send_json(
                send,
                429,
                {"detail": str(error)},
                headers=[(b"retry-after", str(error.retry_after_seconds).encode())],
                close=has_pending_body(scope),
            )
            return
        remember_caller(scope, caller)
        await self.app(scope, receive, send)

    def _guards(self, scope: Scope) -> bool:
        path = route_path(scope)
        return path.startswith(API_PREFIX) and (scope["method"], path) not in self.exempt


def authenticate_request(scope: Scope, gatekeeper: Gatekeeper, authorization: str | None) -> Caller:
    """The caller behind `authorization`, checked within the client address's budget.

    Blocking (the gatekeeper may call an issuer). Raises `CallerAuthenticationError`
    (401), or `TooManyFailedAuthenticationsError` (429) when the address is over its
    budget and the credential cannot be checked without an outbound call.
    """
    budget = getattr(scope["app"].state, FAILED_AUTHENTICATIONS_KEY, None)
    if not isinstance(budget, FailedAuthentications):
        return gatekeeper.authenticate(authorization)  # an app built without the budget
    address = client_address(scope)
    wait = budget.retry_after(address)
    if wait is None:
        try:
            return gatekeeper.authenticate(authorization)
        except CallerAuthenticationError as error:
            if authorization is not None and not error.unverifiable:
                budget.record(address)
            raise
    try:
        return gatekeeper.authenticate(authorization, offline=True)
    except CallerAuthenticationError:
        raise TooManyFailedAuthenticationsError(wait) from None


def _gatekeeper(scope: Scope) -> Gatekeeper:
    gatekeeper: Gatekeeper = scope["app"].state.runtime.gatekeeper
    return gatekeeper
