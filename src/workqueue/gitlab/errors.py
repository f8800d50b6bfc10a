"""GitLab failures, sorted into the two kinds the engine acts on: retry later, or fail now.

`classify` turns whatever python-gitlab or requests raised into a `GitLabError`:

| Cause                                                     | Class     | `status` |
|-----------------------------------------------------------|-----------|----------|
| timeout (connect or read)                                 | Retryable | None     |
| connection refused/reset/dropped, truncated body          | Retryable | None     |
| 2xx whose JSON does not parse (`GitlabParsingError`)      | Retryable | None     |
| 408, 429, 5xx (`Retry-After` → `retry_after`)             | Retryable | the code |
| 409 "Resource lock" (python-gitlab deems it transient)    | Retryable | 409      |
| 400 "Could not update refs/heads/…  Please refresh and    | Retryable | 400      |
|   try again." (a concurrent push won the ref update)      |           |          |
| every other 4xx: 400 validation, 401, 403, 404, 405, 406, | Permanent | the code |
|   409 (duplicate MR, sha mismatch), 422                   |           |          |
| 3xx on a write (`RedirectError`: wrong base URL)          | Permanent | None     |
| invalid URL/schema, too many redirects, other requests    | Permanent | None     |
| 2xx JSON of an unexpected shape (`ResponseShapeError`)    | Permanent | None     |
| anything else                                             | Permanent | None     |

Permanent does not mean "the item must fail" for every caller: on the merge call, 405
(not mergeable now), 409 (head moved: sha mismatch) and 422/406 (merge attempted and
lost a race) mean "not now"; callers read `status` and decide. `PermanentGitLabError`
is also the engine's `PermanentError`, so an executor that lets one propagate fails
the item at once with `str(error)` (GitLab's own message) as its error.

`message` is GitLab's own text (`message` or `error` of the body, flattened when it is
a list or a dict of field errors), or a description of the transport failure. Every
secret given to `classify` (the token) is replaced by `[REDACTED]` wherever it occurs,
and the original exception is not chained: requests exceptions carry the prepared
request, whose headers hold the token.
"""

from __future__ import annotations

import email.utils
import math
import time
from collections.abc import Iterable, Mapping
from http import HTTPStatus
from typing import Any
from urllib.parse import quote

import requests
from gitlab import exceptions as gitlab_exceptions

from workqueue.queue.errors import PermanentError

REDACTED = "[REDACTED]"
MAX_MESSAGE_LENGTH = 1000

# Substrings of GitLab error messages (or reason phrases) that mark a transient refusal.
_TRANSIENT_409 = "resource lock"
_TRANSIENT_REF_UPDATE = "please refresh and try again"

_TRANSPORT_RETRYABLE: tuple[type[BaseException], ...] = (
    requests.exceptions.Timeout,
    requests.exceptions.ConnectionError,
    requests.exceptions.ChunkedEncodingError,
    requests.exceptions.ContentDecodingError,
)


class ResponseShapeError(ValueError):
    """GitLab answered 2xx, but not with the fields this client reads."""


class GitLabError(Exception):
    """A GitLab call failed. `status` is the HTTP status, or None when there was no answer."""

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        retry_after: float | None = None,
        operation: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.retry_after = retry_after
        self.operation = operation

    def __str__(self) -> str:
        text = self.message
        if self.status is not None and not text.startswith(str(self.status)):
            text = f"{self.status} {text}"
        return f"GitLab {self.operation}: {text}" if self.operation else f"GitLab: {text}"

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(status={self.status!r}, message={self.message!r}, "
            f"retry_after={self.retry_after!r}, operation={self.operation!r})"
        )


# Answers that say "GitLab, or the way to it, is unavailable right now", not
# "this request failed": the engine backs off on them without counting them
# against max_attempts (see `workqueue.queue.errors.is_outage`). A plain 500
# is left out: it may be GitLab failing on this one request, every time.
OUTAGE_STATUSES = frozenset({408, 429, 502, 503, 504})


class RetryableGitLabError(GitLabError):
    """Trying again later can succeed (5xx, 429, timeouts, connection errors)."""

    @property
    def outage(self) -> bool:
        """Rate limited, a gateway error, or no answer at all (connection, timeout)."""
        return self.status is None or self.status in OUTAGE_STATUSES


class PermanentGitLabError(GitLabError, PermanentError):
    """GitLab refused the request; repeating it unchanged gets the same answer."""


def classify(
    exc: BaseException,
    *,
    headers: Mapping[str, str] | None = None,
    reason: str = "",
    secrets: Iterable[str] = (),
    operation: str | None = None,
) -> GitLabError:
    """Map a python-gitlab or requests exception to a `GitLabError` (see the module table).

    `headers` and `reason` are those of the failing HTTP response when the caller saw
    it (python-gitlab's exceptions keep neither): `Retry-After` comes from there.
    """
    if isinstance(exc, GitLabError):
        return exc
    secret_list = [secret for secret in secrets if secret]
    if isinstance(exc, gitlab_exceptions.GitlabError) and exc.response_code is not None:
        return _from_status(
            exc.response_code,
            _flatten(exc.error_message),
            headers=headers or {},
            reason=reason,
            secrets=secret_list,
            operation=operation,
        )
    retryable, text = _without_status(exc)
    kind = RetryableGitLabError if retryable else PermanentGitLabError
    return kind(_redact(text, secret_list), operation=operation)


def _without_status(exc: BaseException) -> tuple[bool, str]:
    """(retryable, message) for a failure that carries no HTTP status."""
    if isinstance(exc, gitlab_exceptions.GitlabParsingError):
        return True, "GitLab answered with a body that is not valid JSON"
    if isinstance(exc, _TRANSPORT_RETRYABLE):
        return True, _describe(exc)
    if isinstance(exc, gitlab_exceptions.RedirectError):
        return False, f"redirected ({_flatten(exc.error_message)}): check the GitLab base URL"
    if isinstance(exc, ResponseShapeError):
        return False, f"unexpected response from GitLab: {exc}"
    return False, _describe(exc)


def retry_after_seconds(headers: Mapping[str, str], *, now: float | None = None) -> float | None:
    """Seconds to wait from `Retry-After` (delta-seconds or HTTP-date), else `RateLimit-Reset`.

    GitLab's rate limiter sends both; `RateLimit-Reset` is a Unix time. None when
    neither header is present or readable.
    """
    lowered = {key.lower(): value for key, value in headers.items()}
    current = time.time() if now is None else now
    value = lowered.get("retry-after")
    if value is not None:
        seconds = _parse_retry_after(value.strip(), current)
        if seconds is not None:
            return seconds
    reset = lowered.get("ratelimit-reset")
    if reset is not None:
        try:
            at = float(reset.strip())
        except ValueError:
            return None
        if math.isfinite(at):
            return max(0.0, at - current)
    return None


def _parse_retry_after(value: str, now: float) -> float | None:
    try:
        seconds = float(value)
    except ValueError:
        pass
    else:
        return max(0.0, seconds) if math.isfinite(seconds) else None
    try:
        moment = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if moment.tzinfo is None:
        return None
    return max(0.0, moment.timestamp() - now)


def _from_status(
    status: int,
    message: str,
    *,
    headers: Mapping[str, str],
    reason: str,
    secrets: list[str],
    operation: str | None,
) -> GitLabError:
    text = _redact(message or _phrase(status), secrets)
    lowered = f"{message} {reason}".lower()
    retryable = (
        status in {408, 429}
        or status >= 500
        or (status == 409 and _TRANSIENT_409 in lowered)
        or (status == 400 and _TRANSIENT_REF_UPDATE in lowered)
    )
    if retryable:
        return RetryableGitLabError(
            text, status=status, retry_after=retry_after_seconds(headers), operation=operation
        )
    return PermanentGitLabError(text, status=status, operation=operation)


def _flatten(message: Any) -> str:
    """GitLab's `message`/`error` as one line: a string, a list, or field → errors."""
    if isinstance(message, bytes):
        message = message.decode("utf-8", errors="replace")
    if isinstance(message, str):
        text = message.strip()
    elif isinstance(message, Mapping):
        parts = []
        for field, errors in message.items():
            values = errors if isinstance(errors, list) else [errors]
            parts.append(f"{field} {', '.join(str(value) for value in values)}")
        text = "; ".join(parts)
    elif isinstance(message, list):
        text = "; ".join(str(item) for item in message)
    elif message is None:
        text = ""
    else:
        text = str(message)
    return text


def _phrase(status: int) -> str:
    try:
        return f"{status} {HTTPStatus(status).phrase}"
    except ValueError:
        return f"{status} (no message)"


def _describe(exc: BaseException) -> str:
    detail = str(exc)
    return f"{type(exc).__name__}: {detail}" if detail else type(exc).__name__


def _redact(text: str, secrets: list[str]) -> str:
    """Secrets out first, then the length cap (a cut must not leave half a token behind)."""
    for secret in secrets:
        for form in {secret, quote(secret, safe="")}:
            text = text.replace(form, REDACTED)
    if len(text) > MAX_MESSAGE_LENGTH:
        text = text[: MAX_MESSAGE_LENGTH - 1] + "…"
    return text
