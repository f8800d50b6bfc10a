"""One GitLab HTTP call under the service's policy, through python-gitlab's `http_*` layer.

Every call:
- has a timeout (connect and each read);
- is made exactly once: python-gitlab's own retries are off per call
  (`retry_transient_errors=False`, `obey_rate_limit=False`, `max_retries=0`; its
  429 handling is on by default even when the client was built without transient
  retries), so the engine's backoff is the only retry policy;
- converts every failure (python-gitlab, requests, a malformed body) into a
  `GitLabError` through `classify`, raised without chaining the original (a requests
  exception holds the prepared request and so the token);
- reports `(operation, status)` to the optional `on_call` callback: the HTTP status of
  the last response, or "timeout" / "connection_error" / "invalid_response" / "error"
  when there was no usable answer.

python-gitlab's exceptions keep neither the status line nor the headers, so a
response hook on the session remembers, per thread, the last response's status,
reason and headers: that is where `Retry-After` and the success status come from.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import gitlab
import requests
from gitlab import exceptions as gitlab_exceptions

from workqueue.gitlab.errors import ResponseShapeError, classify

logger = logging.getLogger(__name__)

T = TypeVar("T")

OnCall = Callable[[str, int | str], None]

# No retries inside python-gitlab: these go with every request, including each page of a list.
_NO_RETRIES: dict[str, Any] = {
    "retry_transient_errors": False,
    "obey_rate_limit": False,
    "max_retries": 0,
}
_PER_PAGE = 100
_TRACE_CHUNK_BYTES = 64 * 1024

_CAUGHT: tuple[type[BaseException], ...] = (
    gitlab_exceptions.GitlabError,
    requests.exceptions.RequestException,
    ResponseShapeError,
)


class _LastResponse(threading.local):
    status: int | None = None
    reason: str = ""
    headers: Mapping[str, str] | None = None

    def clear(self) -> None:
        self.status = None
        self.reason = ""
        self.headers = None


class Transport:
    """Runs GitLab calls for `GitLabClient`; owns the python-gitlab instance's call policy."""

    def __init__(
        self,
        gl: gitlab.Gitlab,
        *,
        timeout: float,
        secrets: tuple[str, ...],
        on_call: OnCall | None = None,
    ) -> None:
        if timeout <= 0:
            raise ValueError("timeout must be positive")
        self._gl = gl
        self._timeout = timeout
        self._secrets = secrets
        self._on_call = on_call
        self._last = _LastResponse()
        gl.session.hooks.setdefault("response", []).append(self._remember)

    def __repr__(self) -> str:
        return f"Transport(url={self._gl.url!r}, timeout={self._timeout!r})"

    @property
    def url(self) -> str:
        return str(self._gl.url)

    def detach(self) -> None:
        """Remove the response hook from the session (the session stays usable)."""
        hooks = self._gl.session.hooks.get("response", [])
        if self._remember in hooks:
            hooks.remove(self._remember)

    # -- verbs -------------------------------------------------------------------------------

    def get(
        self,
        operation: str,
        path: str,
        parse: Callable[[Any], T],
        *,
        query: Mapping[str, Any] | None = None,
    ) -> T:
        def send() -> T:
            return parse(self._gl.http_get(path, query_data=dict(query or {}), **self._options()))

        return self.call(operation, send)

    def get_all(
        self,
        operation: str,
        path: str,
        parse: Callable[[Any], T],
        *,
        query: Mapping[str, Any] | None = None,
    ) -> list[T]:
        """Every page of a list endpoint (python-gitlab follows the `Link` headers)."""

        def send() -> list[T]:
            try:
                items = self._gl.http_list(
                    path,
                    query_data={"per_page": _PER_PAGE, **(query or {})},
                    get_all=True,
                    **self._options(),
                )
            except (KeyError, TypeError) as exc:
                # python-gitlab indexes the body as a list: an object or null fails like this.
                raise ResponseShapeError(f"{operation}: expected a JSON list") from exc
            if not isinstance(items, list):
                raise ResponseShapeError(f"{operation}: expected a JSON list")
            return [parse(item) for item in items]

        return self.call(operation, send)

    def post(
        self, operation: str, path: str, parse: Callable[[Any], T], data: Mapping[str, Any]
    ) -> T:
        def send() -> T:
            return parse(self._gl.http_post(path, post_data=dict(data), **self._options()))

        return self.call(operation, send)

    def put(
        self, operation: str, path: str, parse: Callable[[Any], T], data: Mapping[str, Any]
    ) -> T:
        def send() -> T:
            return parse(self._gl.http_put(path, post_data=dict(data), **self._options()))

        return self.call(operation, send)

    def delete(self, operation: str, path: str) -> None:
        def send() -> None:
            self._gl.http_delete(path, **self._options())

        self.call(operation, send)

    def get_tail(self, operation: str, path: str, max_bytes: int) -> tuple[bytes, bool]:
        """The last `max_bytes` of a raw body, streamed so memory stays bounded.

        Returns the bytes and whether anything before them was dropped.
        """

        def send() -> tuple[bytes, bool]:
            response = self._gl.http_get(path, streamed=True, raw=True, **self._options())
            if not isinstance(response, requests.Response):
                raise ResponseShapeError(f"{operation}: expected a raw body")
            tail = bytearray()
            dropped = False
            try:
                for chunk in response.iter_content(chunk_size=_TRACE_CHUNK_BYTES):
                    tail += chunk
                    if len(tail) > max_bytes:
                        del tail[: len(tail) - max_bytes]
                        dropped = True
            finally:
                response.close()
            return bytes(tail), dropped

        return self.call(operation, send)

    # -- the policy ----------------------------------------------------------------------------

    def call(self, operation: str, send: Callable[[], T]) -> T:
        """Run `send` once; report it; turn any failure into a `GitLabError`."""
        self._last.clear()
        try:
            result = send()
        except _CAUGHT as exc:
            error = classify(
                exc,
                headers=self._last.headers,
                reason=self._last.reason,
                secrets=self._secrets,
                operation=operation,
            )
            label: int | str = error.status if error.status is not None else _label(exc)
        else:
            self._report(operation, self._last.status or 200)
            return result
        # Raised outside the except block: no __context__ pointing at the original exception.
        self._report(operation, label)
        raise error

    def _options(self) -> dict[str, Any]:
        return {"timeout": self._timeout, **_NO_RETRIES}

    def _remember(self, response: requests.Response, *_: Any, **__: Any) -> requests.Response:
        self._last.status = response.status_code
        self._last.reason = response.reason or ""
        self._last.headers = response.headers
        return response

    def _report(self, operation: str, status: int | str) -> None:
        if self._on_call is None:
            return
        try:
            self._on_call(operation, status)
        except Exception:
            # Metrics must never break a GitLab operation.
            logger.exception("on_call callback failed for %s", operation)


def _label(exc: BaseException) -> str:
    if isinstance(exc, requests.exceptions.Timeout):
        return "timeout"
    if isinstance(
        exc, (requests.exceptions.ConnectionError, requests.exceptions.ChunkedEncodingError)
    ):
        return "connection_error"
    if isinstance(exc, ResponseShapeError | gitlab_exceptions.GitlabParsingError):
        return "invalid_response"
    return "error"
