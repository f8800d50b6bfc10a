"""The client commands' side of HTTP: where the service is, who we are, and what went wrong.

Every failure becomes a `ClientError` carrying the exit code of the CLI contract
(1 the service answered an error, 2 usage, 3 the service cannot be reached) and
the lines to print; the commands never let an httpx exception through.

This module deliberately imports nothing from the server side of the package:
the client talks to the service only through the public HTTP contract.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any, Self

import httpx

URL_VARIABLE = "WORKQUEUE_SERVICE_URL"
# Where `serve` listens when given no options: a local trial needs no --url.
DEFAULT_SERVICE_URL = "http://127.0.0.1:8080"
# The only place the token may come from.
TOKEN_VARIABLE = "WORKQUEUE_SERVICE_TOKEN"  # noqa: S105 - a variable name, not a secret

EXIT_SERVICE_ERROR = 1
EXIT_USAGE = 2
EXIT_UNREACHABLE = 3

# Generous for a slow service, bounded so that a stalled one ends with exit 3.
REQUEST_TIMEOUT = httpx.Timeout(30.0, connect=10.0)
USER_AGENT = "workqueue-service-cli"
# Enough of a non-JSON error page (a proxy's HTML) to recognise it, on one line.
MAX_TEXT_EXCERPT = 200


class ClientError(Exception):
    """A failure the CLI reports as `error: ...` lines on stderr and an exit code."""

    exit_code = EXIT_SERVICE_ERROR

    def lines(self) -> list[str]:
        return [str(self)]


class UsageError(ClientError):
    """Bad input on the command line or in the environment (exit 2)."""

    exit_code = EXIT_USAGE


class UnreachableError(ClientError):
    """No HTTP answer: connection refused, DNS, TLS, timeout (exit 3)."""

    exit_code = EXIT_UNREACHABLE


class UnexpectedAnswerError(ClientError):
    """A success status with a body that is not what the contract promises (exit 1)."""


@dataclass(frozen=True)
class Problem:
    """One entry of a 422 `detail` list: where (`body.file_actions.0.file_path`) and what."""

    location: tuple[str | int, ...]
    message: str

    def line(self) -> str:
        where = ".".join(str(part) for part in self.location)
        return f"{where}: {self.message}" if where else self.message


class ServiceError(ClientError):
    """The service answered with a 4xx/5xx status (exit 1)."""

    def __init__(
        self, status: int, message: str | None, problems: tuple[Problem, ...] = ()
    ) -> None:
        super().__init__(message or _status_phrase(status))
        self.status = status
        self.message = message
        self.problems = problems

    def lines(self) -> list[str]:
        if self.problems:
            return [problem.line() for problem in self.problems]
        text = f"HTTP {self.status} {_status_phrase(self.status)}"
        return [f"{text}: {self.message}" if self.message else text]

    def with_hints(self, hint: Callable[[tuple[str | int, ...]], str | None]) -> ServiceError:
        """The same answer with `(hint)` appended to the problems `hint` knows about."""
        problems = []
        for problem in self.problems:
            extra = hint(problem.location)
            message = f"{problem.message} ({extra})" if extra else problem.message
            problems.append(Problem(problem.location, message))
        return ServiceError(self.status, self.message, tuple(problems))

    @classmethod
    def from_response(cls, response: httpx.Response) -> ServiceError:
        try:
            body = response.json()
        except ValueError:
            excerpt = " ".join(response.text.split())[:MAX_TEXT_EXCERPT]
            return cls(response.status_code, excerpt or None)
        detail = body.get("detail", body) if isinstance(body, dict) else body
        if isinstance(detail, list):
            problems = tuple(_problem(entry) for entry in detail)
            return cls(response.status_code, None, problems)
        return cls(response.status_code, detail if isinstance(detail, str) else str(detail))


def _problem(entry: Any) -> Problem:
    if isinstance(entry, dict):
        location = entry.get("loc") or ()
        return Problem(tuple(location), str(entry.get("msg", entry)))
    return Problem((), str(entry))


def _status_phrase(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "error"


def service_url(option: str | None) -> str:
    """`--url`, else the environment (typer merged both), else the default; exit 2 if unusable.

    An empty value counts as unset, as for DATABASE_URL.
    """
    url = (option or "").strip() or DEFAULT_SERVICE_URL
    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL as error:
        raise UsageError(f"invalid service URL {url!r}: {error}") from None
    if parsed.scheme not in {"http", "https"} or not parsed.host:
        raise UsageError(f"invalid service URL {url!r}: expected http(s)://host[:port]")
    return url


def token_from_environment(environ: Mapping[str, str] = os.environ) -> str | None:
    token = environ.get(TOKEN_VARIABLE, "").strip()
    return token or None


class ServiceClient:
    """JSON over HTTP to one service, with the caller's bearer token when there is one."""

    def __init__(self, base_url: str, token: str | None) -> None:
        headers = {"User-Agent": USER_AGENT, "Accept": "application/json"}
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        self.base_url = base_url
        self._token = token
        # Redirects are followed (http → https behind a router); httpx drops the
        # Authorization header when a redirect leaves the origin.
        self._http = httpx.Client(
            base_url=base_url, headers=headers, timeout=REQUEST_TIMEOUT, follow_redirects=True
        )

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *_: object) -> None:
        self._http.close()

    def get(self, path: str, params: Mapping[str, str | int] | None = None) -> Any:
        return self._request("GET", path, params=params, body=None)

    def post(self, path: str, body: Any = None, headers: Mapping[str, str] | None = None) -> Any:
        return self._request("POST", path, body=body, headers=headers)

    def redact(self, text: str) -> str:
        """`text` without the token, whatever echoed it."""
        return text.replace(self._token, "***") if self._token else text

    def _request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str | int] | None = None,
        body: Any,
        headers: Mapping[str, str] | None = None,
    ) -> Any:
        try:
            response = self._http.request(method, path, params=params, json=body, headers=headers)
        except httpx.TimeoutException:
            raise UnreachableError(f"{self.base_url} did not answer in time") from None
        except httpx.RequestError as error:  # connection, TLS, protocol, redirect loops
            reason = self.redact(str(error)) or type(error).__name__
            raise UnreachableError(f"cannot reach {self.base_url}: {reason}") from None
        if response.is_error:
            answer = ServiceError.from_response(response)
            if response.status_code == 401 and self._token is None:
                reason = answer.message or "unauthenticated"
                answer = ServiceError(401, f"{reason} ({TOKEN_VARIABLE} is not set)")
            raise answer
        try:
            return response.json()
        except ValueError:
            raise UnexpectedAnswerError(f"the answer to {method} {path} is not JSON") from None
