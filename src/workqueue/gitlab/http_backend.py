"""A python-gitlab backend that sends through urllib3 directly, with requests' semantics.

python-gitlab's default backend hands every call to `requests.Session.request`, which
merges session and request settings, builds a `PreparedRequest`, dispatches through the
session and the adapter: about 0.3 ms of interpreter time per `GET merge_request` on top
of urllib3 alone (microbenchmark, docs/benchmarks.md). `Urllib3Backend` does the same
work for the requests this service makes, in fewer steps:

- the URL and the merged, validated headers are requests' own results (its
  `prepare_url`, `_encode_params`, `merge_setting`, `check_header_validity`),
  cached per base URL and per header set: they repeat from call to call;
- the connection comes from the session's own `HTTPAdapter` (its pool manager, TLS
  settings from `verify`, the same pools as the requests path), and the request goes to
  `urlopen` with the arguments `HTTPAdapter.send` uses; urllib3's exceptions become the
  requests exceptions `HTTPAdapter.send` would raise, so `errors.classify` sees the same
  types and messages;
- the answer is a real `requests.Response` built by the adapter: its body reading,
  `json()`, `links`, `iter_content` and the error mapping in them are requests' own;
- the session's response hooks run as `Session.send` runs them, and redirects go to
  `Session.resolve_redirects` (rare: the whole requests redirect policy, unchanged).

Anything else goes through `Session.request` unchanged, exactly as the default backend
would send it: a session whose `send` or `request` is not requests' own (OpenTelemetry's
requests instrumentation wraps `send` to trace each call), one that trusts the
environment (reads proxies and CA bundles on each call), holds cookies, auth, params or
a client certificate; a request through a proxy; a body that is not JSON (files, raw
data); an auth or adapter of another kind; a URL with credentials, a query or a fragment
of its own. Cookies a fast answer sets land in the session's jar, so the calls after it
take the requests path and send them.

This leans on parts of requests and python-gitlab that are not their public API
(`RequestEncodingMixin._encode_params`, `HTTPAdapter.cert_verify` and `build_response`,
`_urllib3_request_context`'s pool key, copied; `RequestsBackend`). The tests send each
kind of call the client makes through both backends and compare the wire and the
outcome, so an upgrade that makes them differ there fails them.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import time
from collections.abc import Mapping
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import requests
from gitlab._backends.requests_backend import RequestsBackend, RequestsResponse, TokenAuth
from requests import compat as requests_compat
from requests import exceptions as requests_errors
from requests.adapters import HTTPAdapter
from requests.auth import HTTPBasicAuth
from requests.cookies import RequestsCookieJar, extract_cookies_to_jar
from requests.hooks import dispatch_hook
from requests.models import PreparedRequest, RequestEncodingMixin
from requests.sessions import merge_setting
from requests.structures import CaseInsensitiveDict
from requests.utils import check_header_validity, get_auth_from_url, select_proxy
from urllib3 import exceptions as urllib3_errors
from urllib3.connectionpool import HTTPConnectionPool
from urllib3.response import BaseHTTPResponse
from urllib3.util import Timeout

# The keyword arguments python-gitlab passes beyond the named ones (`_get_session_opts`).
_FAST_KWARGS = frozenset({"headers", "auth"})
_NO_BODY_METHODS = ("GET", "HEAD")
# requests' own Session methods: a session whose class replaces or wraps them (a subclass,
# OpenTelemetry's requests instrumentation, which traces each GitLab call from
# Session.send) gets every request through them.
_SESSION_SEND = inspect.unwrap(requests.Session.send)
_SESSION_REQUEST = inspect.unwrap(requests.Session.request)


@dataclasses.dataclass(frozen=True, slots=True)
class _BaseURL:
    """requests' prepared form of a URL without params, and where it connects."""

    url: str
    path_url: str
    scheme: str
    host: str | None
    port: int | None


@functools.lru_cache(maxsize=4096)
def _base_url(url: str) -> _BaseURL | None:
    """`url` as `PreparedRequest.prepare_url` leaves it (no params), or None when the
    fast path must not take it (not http(s), credentials, a query or fragment of its own).

    Raises what `prepare_url` raises for a bad URL (not cached).
    """
    probe = PreparedRequest()
    probe.prepare_url(url, None)
    prepared = str(probe.url)
    if not prepared.startswith(("http://", "https://")) or "?" in prepared or "#" in prepared:
        return None
    if any(get_auth_from_url(prepared)):
        return None  # requests turns URL credentials into basic auth
    parsed = urlparse(prepared)
    try:
        port = parsed.port
    except ValueError:
        return None  # requests raises InvalidURL for it: leave that to requests
    # The host parameters `_urllib3_request_context` derives from the URL.
    return _BaseURL(prepared, probe.path_url, parsed.scheme.lower(), parsed.hostname, port)


def _pool_kwargs(verify: bool | str) -> dict[str, Any]:
    """The TLS part of urllib3's pool key, as requests' `_urllib3_request_context` sets it
    (it depends on `verify` alone; no client certificate on the fast path)."""
    pool_kwargs: dict[str, Any] = {}
    if verify is False:
        pool_kwargs["cert_reqs"] = "CERT_NONE"
        return pool_kwargs
    if isinstance(verify, str):
        if not Path(verify).is_dir():
            pool_kwargs["ca_certs"] = verify
        else:
            pool_kwargs["ca_cert_dir"] = verify
    pool_kwargs["cert_reqs"] = "CERT_REQUIRED"
    return pool_kwargs


@functools.lru_cache(maxsize=64)
def _merged_headers(
    request_headers: tuple[tuple[str, Any], ...], session_headers: tuple[tuple[str, Any], ...]
) -> CaseInsensitiveDict[Any]:
    """`Session.prepare_request`'s header merge and `prepare_headers`' validation."""
    merged = merge_setting(
        dict(request_headers), CaseInsensitiveDict(session_headers), CaseInsensitiveDict
    )
    headers: CaseInsensitiveDict[Any] = CaseInsensitiveDict()
    for header in merged.items():
        check_header_validity(header)
        headers[header[0]] = header[1]
    return headers


class TokenSafeSession(requests.Session):
    """A `requests.Session` that drops GitLab's token headers on a redirect to another
    host or from https to http, as requests drops `Authorization` there.

    python-gitlab sends the token as `PRIVATE-TOKEN` (or `JOB-TOKEN`), which requests
    copies to the redirected request as any other header: a GitLab front that answers
    30x to somewhere else would otherwise collect the bot's token.
    """

    def rebuild_auth(
        self, prepared_request: requests.PreparedRequest, response: requests.Response
    ) -> None:
        super().rebuild_auth(prepared_request, response)
        original = response.request.url
        if (
            original is not None
            and prepared_request.url is not None
            and self.should_strip_auth(original, prepared_request.url)
        ):
            for header in ("PRIVATE-TOKEN", "JOB-TOKEN"):
                prepared_request.headers.pop(header, None)


class Urllib3Backend(RequestsBackend):
    """python-gitlab's `RequestsBackend`, sending its common requests through urllib3.

    `client` is still the `requests.Session`: its settings (headers, proxies, hooks,
    verify, adapters) are the ones used, and `close()` on it closes the pools.
    """

    def http_request(
        self,
        method: str,
        url: str,
        json: dict[str, Any] | bytes | None = None,
        data: Any | None = None,
        params: Any | None = None,
        timeout: float | None = None,
        verify: bool | str | None = True,
        stream: bool | None = False,
        **kwargs: Any,
    ) -> RequestsResponse:
        session = self._client
        prepared = self._prepare(session, method, url, json, data, params, kwargs)
        if prepared is None:
            return super().http_request(
                method, url, json, data, params, timeout, verify, stream, **kwargs
            )
        request, base = prepared
        # `Session.request`'s merge_environment_settings with trust_env off.
        send_kwargs: dict[str, Any] = {
            "stream": session.stream if stream is None else stream,
            "timeout": timeout,
            "verify": session.verify if verify is None else verify,
            "cert": session.cert,
            # merge_setting({}, session.proxies): a copy without None values.
            "proxies": {key: value for key, value in session.proxies.items() if value is not None},
        }
        if send_kwargs["proxies"] and select_proxy(str(request.url), send_kwargs["proxies"]):
            return super().http_request(
                method, url, json, data, params, timeout, verify, stream, **kwargs
            )
        adapter = session.get_adapter(url=str(request.url))
        if type(adapter) is not HTTPAdapter:
            return super().http_request(
                method, url, json, data, params, timeout, verify, stream, **kwargs
            )
        return RequestsResponse(self._send(session, adapter, request, base, send_kwargs))

    @staticmethod
    def _prepare(
        session: requests.Session,
        method: str,
        url: str,
        json: Any,
        data: Any,
        params: Any,
        kwargs: Mapping[str, Any],
    ) -> tuple[PreparedRequest, _BaseURL] | None:
        """What `Session.prepare_request` would build, or None for the requests path."""
        auth = kwargs.get("auth")
        if not _fast_path_allowed(session, data, auth, kwargs):
            return None
        # Credentials in the URL are requests' to handle, and kept out of the cache.
        base = None if "@" in url else _base_url(url)
        if base is None:
            return None
        query = RequestEncodingMixin._encode_params(params) if params else ""  # noqa: SLF001
        if query:
            # `prepare_url` appends the encoded params and requotes: urlencode's output
            # (unreserved characters, %XX, + = &) requotes to itself.
            base = dataclasses.replace(
                base, url=f"{base.url}?{query}", path_url=f"{base.path_url}?{query}"
            )
        request = PreparedRequest()
        request.method = method.upper()
        request.url = base.url
        request_headers = kwargs.get("headers") or {}
        try:
            merged = _merged_headers(tuple(request_headers.items()), tuple(session.headers.items()))
        except TypeError:  # an unhashable header value: let requests judge it
            return None
        request.headers = merged.copy()
        _prepare_body(request, json)
        if auth is not None:
            auth(request)  # prepare_auth: it sets its header on the request
        # merge_hooks with no request hooks gives the session's; prepare_hooks copies them.
        for event, hooks in session.hooks.items():
            request.register_hook(event, hooks)
        return request, base

    @staticmethod
    def _send(
        session: requests.Session,
        adapter: HTTPAdapter,
        request: PreparedRequest,
        base: _BaseURL,
        kwargs: dict[str, Any],
    ) -> requests.Response:
        """`Session.send` and `HTTPAdapter.send` for a request with no proxy."""
        verify = kwargs["verify"]
        start = time.perf_counter()
        # HTTPAdapter.get_connection_with_tls_context without a proxy.
        try:
            conn = adapter.poolmanager.connection_from_host(
                base.host, base.port, base.scheme, pool_kwargs=_pool_kwargs(verify)
            )
        except urllib3_errors.LocationValueError as error:
            raise requests_errors.InvalidURL(error, request=request) from None
        adapter.cert_verify(conn, base.url, verify, None)
        timeout = kwargs["timeout"]
        if isinstance(timeout, tuple):
            connect, read = timeout
            timeout = Timeout(connect=connect, read=read)
        elif not isinstance(timeout, Timeout):
            timeout = Timeout(connect=timeout, read=timeout)
        raw = _urlopen(conn, request, base.path_url, adapter, timeout)
        response = adapter.build_response(request, raw)
        response.elapsed = timedelta(seconds=time.perf_counter() - start)
        response = dispatch_hook("response", request.hooks, response, **kwargs)
        if "set-cookie" in raw.headers or "set-cookie2" in raw.headers:
            extract_cookies_to_jar(session.cookies, request, raw)
        if response.is_redirect:
            # What prepare_request would have merged: no cookies (else: the requests path).
            request._cookies = RequestsCookieJar()  # noqa: SLF001
            history = list(session.resolve_redirects(response, request, **kwargs))
            if history:
                history.insert(0, response)
                response = history.pop()
                response.history = history
        if not kwargs["stream"]:
            response.content  # noqa: B018 - read the body now, as Session.send does
        return response


def _fast_path_allowed(
    session: requests.Session, data: Any, auth: Any, kwargs: Mapping[str, Any]
) -> bool:
    return not (
        type(session).send is not _SESSION_SEND
        or type(session).request is not _SESSION_REQUEST
        or session.trust_env
        or len(session.cookies)
        or session.auth is not None
        or session.params
        or session.cert is not None
        or data is not None
        or not _FAST_KWARGS.issuperset(kwargs)
        or not (auth is None or isinstance(auth, TokenAuth | HTTPBasicAuth))
    )


def _prepare_body(request: PreparedRequest, json: Any) -> None:
    """`prepare_body` for a JSON body or none, with `prepare_content_length`."""
    body: bytes | None = None
    if json is not None:
        try:
            # requests.compat.json: simplejson when installed, as prepare_body uses.
            dumped = requests_compat.json.dumps(json, allow_nan=False)  # type: ignore[attr-defined]
        except ValueError as error:
            raise requests_errors.InvalidJSONError(error, request=request) from None
        body = dumped if isinstance(dumped, bytes) else dumped.encode("utf-8")
    if body is not None:
        if body:
            request.headers["Content-Length"] = str(len(body))
    elif request.method not in _NO_BODY_METHODS and "Content-Length" not in request.headers:
        request.headers["Content-Length"] = "0"
    if json is not None and "content-type" not in request.headers:
        request.headers["Content-Type"] = "application/json"
    request.body = body


def _urlopen(
    conn: HTTPConnectionPool,
    request: PreparedRequest,
    path_url: str,
    adapter: HTTPAdapter,
    timeout: Timeout,
) -> BaseHTTPResponse:
    """`HTTPAdapter.send`'s urlopen call, its exceptions turned into the same requests ones."""
    try:
        return conn.urlopen(
            method=str(request.method),
            url=path_url,
            body=request.body,  # type: ignore[arg-type]  # bytes or None here
            headers=request.headers,  # type: ignore[arg-type]  # as HTTPAdapter.send passes them
            redirect=False,
            assert_same_host=False,
            preload_content=False,
            decode_content=False,
            retries=adapter.max_retries,
            timeout=timeout,
            chunked=False,
        )
    except (OSError, urllib3_errors.HTTPError) as error:
        translated = _requests_error(error, request)
        if translated is None:
            raise
        raise translated from None


# `HTTPAdapter.send`'s except clauses after MaxRetryError, in order: what urllib3 raised,
# what requests raises instead, and whether that carries the request.
_ADAPTER_ERRORS: tuple[tuple[Any, type[requests_errors.RequestException], bool], ...] = (
    (urllib3_errors.ProtocolError | OSError, requests_errors.ConnectionError, True),
    (urllib3_errors.ClosedPoolError, requests_errors.ConnectionError, True),
    (urllib3_errors.ProxyError, requests_errors.ProxyError, False),
    (urllib3_errors.SSLError, requests_errors.SSLError, True),
    (urllib3_errors.ReadTimeoutError, requests_errors.ReadTimeout, True),
    (urllib3_errors.InvalidHeader, requests_errors.InvalidHeader, True),
)


def _requests_error(error: Exception, request: PreparedRequest) -> Exception | None:
    """The exception `HTTPAdapter.send` raises for `error`, or None when it lets it through."""
    if isinstance(error, urllib3_errors.MaxRetryError):
        return _after_retries(error, request)
    for kind, replacement, with_request in _ADAPTER_ERRORS:
        if isinstance(error, kind):
            return replacement(error, request=request if with_request else None)
    return None


def _after_retries(
    error: urllib3_errors.MaxRetryError, request: PreparedRequest
) -> requests_errors.RequestException:
    errors = requests_errors
    reason = error.reason
    if isinstance(reason, urllib3_errors.ConnectTimeoutError) and not isinstance(
        reason, urllib3_errors.NewConnectionError
    ):
        return errors.ConnectTimeout(error, request=request)
    if isinstance(reason, urllib3_errors.ResponseError):
        return errors.RetryError(error, request=request)
    if isinstance(reason, urllib3_errors.ProxyError):
        return errors.ProxyError(error, request=request)
    if isinstance(reason, urllib3_errors.SSLError):
        return errors.SSLError(error, request=request)
    return errors.ConnectionError(error, request=request)
