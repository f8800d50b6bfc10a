"""Who is looking at the dashboard: the API's gatekeeper, fed from what a browser can send.

In order: an `Authorization` header (a token pasted into the page, which
the page's script adds to its own requests), the OAuth proxy's
`X-Forwarded-Access-Token` (verified like any bearer token, so a forged
header proves nothing), then no credentials at all, which only the
development-only local user accepts (the server refuses to run it off
loopback). Tokens never travel in a URL or a cookie. Failed checks count
against the client address's budget as the API's do (429 over it).
"""

from __future__ import annotations

from fastapi import HTTPException, Request

from workqueue.api.caller_state import Caller
from workqueue.api.deps import CallerAuthenticationError, Runtime
from workqueue.api.middleware.authentication import authenticate_request
from workqueue.api.middleware.failed_authentications import TooManyFailedAuthenticationsError

FORWARDED_TOKEN_HEADER = "x-forwarded-access-token"  # noqa: S105 - a header name


class SignInNeededError(Exception):
    """No credentials, or credentials the gatekeeper refused (message safe to show)."""

    def __init__(self, message: str, *, rejected: bool) -> None:
        super().__init__(message)
        self.rejected = rejected  # a token was sent and refused (not just missing)


def dashboard_caller(request: Request, runtime: Runtime) -> Caller:
    """The proven caller of a dashboard request; `SignInNeededError` otherwise.

    Blocking (the gatekeeper may call an OIDC issuer): run it in a worker thread.
    """
    authorization = request.headers.get("authorization")
    if authorization is None:
        forwarded = request.headers.get(FORWARDED_TOKEN_HEADER)
        if forwarded:
            authorization = f"Bearer {forwarded}"
    try:
        return authenticate_request(request.scope, runtime.gatekeeper, authorization)
    except CallerAuthenticationError as error:
        raise SignInNeededError(str(error), rejected=authorization is not None) from None
    except TooManyFailedAuthenticationsError as error:
        retry_after = {"Retry-After": str(error.retry_after_seconds)}
        raise HTTPException(status_code=429, detail=str(error), headers=retry_after) from None
