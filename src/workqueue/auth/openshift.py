"""Opaque OpenShift tokens (`sha256~...`), checked by the user's own `users/~` call (DDR-24).

`GET /apis/user.openshift.io/v1/users/~` with the caller's token returns
the user it belongs to and the user's groups, and needs no cluster role
(TokenReview would need `system:auth-delegator`, which managed clusters do
not grant). Users are cached for a few minutes so that each API request
does not cost an API-server round trip; tokens OpenShift refused are cached
for `DEFAULT_REFUSAL_TTL_SECONDS` (10 s), so that repeating a bogus token
costs one call, not one per request (API.md v1.2, "Answers").

Three rules keep the caches safe (DDR-27):

- a refusal is kept only briefly, and only for the token refused: the OAuth
  proxy refreshes a session with a new token, which is asked about at once;
- an API failure (OpenShift unreachable, an answer that is no `User`) is
  never cached: the next request asks again;
- the caches (and the tokens known valid, below) are keyed by a SHA-256 of
  the token, never the token itself, so a heap dump or debugger view of them
  holds no usable credential; all are bounded, the oldest entries dropped
  first, so unique tokens cannot grow memory.

`offline=True` answers from the caches, and asks OpenShift again only about a
token it has seen valid within `DEFAULT_KNOWN_TTL_SECONDS` (the HTTP layer asks
so for a client address over its budget of failed authentications). A user's
cache entry lasts 5 minutes, and an address can be kept over its budget for
as long as anyone likes (every caller behind the OpenShift router shares one):
without that memory, every known caller would be refused 5 minutes into it,
while the calls it allows need a token that was valid.
"""

from __future__ import annotations

import hashlib
import json
import logging
import ssl
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, Generic, TypeVar

import httpx

from workqueue.auth.errors import AuthenticationError, IssuerUnavailableError
from workqueue.auth.principal import Principal

logger = logging.getLogger(__name__)

OPENSHIFT_TOKEN_PREFIX = "sha256~"  # noqa: S105 - the prefix marking a token type, not a secret
USERS_SELF_PATH = "/apis/user.openshift.io/v1/users/~"
DEFAULT_CACHE_TTL_SECONDS = 300.0
DEFAULT_REFUSAL_TTL_SECONDS = 10.0
# How long a token seen valid may still be asked about offline: a day, the
# lifetime of OpenShift's OAuth tokens and of the OAuth proxy's session.
DEFAULT_KNOWN_TTL_SECONDS = 24 * 3600.0
# Users need valid tokens, so that cache stays small; refusals need none, and
# the bound is what keeps an attacker's unique tokens from growing memory.
DEFAULT_CACHE_MAX_ENTRIES = 10_000
DEFAULT_HTTP_TIMEOUT_SECONDS = 5.0
MAX_RESPONSE_BYTES = 1024 * 1024


def token_cache_key(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def _principal_from_user(document: Any) -> Principal | None:
    """The principal described by a `User` object, or None if it is not one."""
    if not isinstance(document, dict) or not isinstance(document.get("metadata"), dict):
        return None
    name = document["metadata"].get("name")
    if not isinstance(name, str) or not name:
        return None
    groups = document.get("groups")
    group_names = (
        [group for group in groups if isinstance(group, str)] if isinstance(groups, list) else []
    )
    return Principal(identity=name, kind="openshift", groups=frozenset(group_names))


_Value = TypeVar("_Value")


class ExpiringCache(Generic[_Value]):
    """At most `max_entries` values, each for `ttl_seconds`; the oldest go first. Thread-safe."""

    def __init__(self, *, ttl_seconds: float, max_entries: int, clock: Callable[[], float]) -> None:
        self._ttl = ttl_seconds
        self._max_entries = max_entries
        self._clock = clock
        self._lock = threading.Lock()
        # key -> (expires at, value), oldest first.
        self._entries: OrderedDict[str, tuple[float, _Value]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: str) -> _Value | None:
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return None
            expires_at, value = entry
            if self._clock() >= expires_at:
                del self._entries[key]
                return None
            return value

    def discard(self, key: str) -> None:
        with self._lock:
            self._entries.pop(key, None)

    def put(self, key: str, value: _Value) -> None:
        with self._lock:
            now = self._clock()
            self._entries.pop(key, None)
            if len(self._entries) >= self._max_entries:
                for stale in [k for k, (expires, _) in self._entries.items() if expires <= now]:
                    del self._entries[stale]
            while len(self._entries) >= self._max_entries:
                self._entries.popitem(last=False)
            self._entries[key] = (now + self._ttl, value)


class OpenShiftUsers:
    """Authenticates OpenShift tokens against one API server. Thread-safe."""

    def __init__(
        self,
        api_url: str,
        *,
        tls: ssl.SSLContext | bool = True,
        cache_ttl_seconds: float = DEFAULT_CACHE_TTL_SECONDS,
        refusal_ttl_seconds: float = DEFAULT_REFUSAL_TTL_SECONDS,
        known_ttl_seconds: float = DEFAULT_KNOWN_TTL_SECONDS,
        cache_max_entries: int = DEFAULT_CACHE_MAX_ENTRIES,
        http_timeout_seconds: float = DEFAULT_HTTP_TIMEOUT_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.users_url = api_url.rstrip("/") + USERS_SELF_PATH
        self._http = httpx.Client(verify=tls, timeout=http_timeout_seconds, follow_redirects=False)
        self._users: ExpiringCache[Principal] = ExpiringCache(
            ttl_seconds=cache_ttl_seconds, max_entries=cache_max_entries, clock=clock
        )
        # token hash -> the refusal's reason
        self._refusals: ExpiringCache[str] = ExpiringCache(
            ttl_seconds=refusal_ttl_seconds, max_entries=cache_max_entries, clock=clock
        )
        # token hash -> its user's name: tokens OpenShift said were valid, which
        # `offline` may ask about again.
        self._known: ExpiringCache[str] = ExpiringCache(
            ttl_seconds=known_ttl_seconds, max_entries=cache_max_entries, clock=clock
        )

    def close(self) -> None:
        self._http.close()

    def authenticate(self, token: str, *, offline: bool = False) -> Principal:
        """The user of `token`; `offline`: AuthenticationError unless it is cached or known."""
        cache_key = token_cache_key(token)
        principal = self._users.get(cache_key)
        if principal is not None:
            return principal
        refused = self._refusals.get(cache_key)
        if refused is not None:
            raise AuthenticationError(refused)
        if offline and self._known.get(cache_key) is None:
            raise AuthenticationError("token not checked: too many failed authentications")
        # No lock around the call: one slow API call must not stall every other
        # user. Two concurrent first requests with one token both ask; the
        # answers are the same.
        try:
            principal = self._look_up(token)
        except IssuerUnavailableError:
            raise
        except AuthenticationError as error:
            self._refusals.put(cache_key, error.reason)
            self._known.discard(cache_key)
            raise
        self._users.put(cache_key, principal)
        self._known.put(cache_key, principal.identity)
        return principal

    def _look_up(self, token: str) -> Principal:
        headers = {"Authorization": f"Bearer {token}", "Accept": "application/json"}
        try:
            with self._http.stream("GET", self.users_url, headers=headers) as response:
                status = response.status_code
                body = bytearray()
                for chunk in response.iter_bytes():
                    body += chunk
                    if len(body) > MAX_RESPONSE_BYTES:
                        break
        except httpx.HTTPError as error:
            logger.warning("OpenShift users/~ at %s unreachable: %s", self.users_url, error)
            raise IssuerUnavailableError("OpenShift API unavailable") from None
        if status in {401, 403}:
            raise AuthenticationError("token rejected by OpenShift")
        if status != 200 or len(body) > MAX_RESPONSE_BYTES:
            logger.warning("OpenShift users/~ at %s answered HTTP %d", self.users_url, status)
            raise IssuerUnavailableError("OpenShift API unavailable")
        try:
            principal = _principal_from_user(json.loads(body))
        except ValueError:
            principal = None
        if principal is None:
            logger.warning("OpenShift users/~ at %s did not return a User", self.users_url)
            raise IssuerUnavailableError("OpenShift API unavailable")
        return principal
