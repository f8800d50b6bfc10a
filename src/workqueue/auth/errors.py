"""Why a request could not be authenticated.

Reasons are short fixed phrases chosen here, never text copied from a
library exception or from the request: a token (or a fragment of one) must
not reach a response body, a log line or an error tracker.
"""

from __future__ import annotations


class AuthenticationError(Exception):
    """The caller is not authenticated (HTTP 401). `reason` is safe to show."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class IssuerUnavailableError(AuthenticationError):
    """The token could not be checked because the issuer or the OpenShift API did not answer.

    Still an authentication failure (fail closed); a subclass so the HTTP
    layer may answer 503 instead of 401 if it prefers to tell the caller that
    retrying later can help.
    """
