"""Opaque OpenShift tokens (`sha256~...`), checked by the user's own `users/~` call (DDR-24).

`GET /apis/user.openshift.io/v1/users/~` with the caller's token returns
the user it belongs to and the user's groups, and needs no cluster role
(TokenReview would need `system:auth-delegator`, which managed clusters do
not grant). Answers are cached for a few minutes so that each API request
does not cost an API-server round trip.

Two rules keep the cache safe (DDR-27):

- failures are never cached: an expired token that the OAuth proxy has
  since refreshed must work on the very next request;
- the cache is keyed by a SHA-256 of the token, never the token itself, so
  a heap dump or debugger view of the cache holds no usable credential.
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
from typing import Any

import httpx

from workqueue.auth.errors import AuthenticationError, IssuerUnavailableError
from workqueue.auth.principal import Principal

logger = logging.getLogger(__name__)

OPENSHIFT_TOKEN_PREFIX = "sha256~"  # noqa: S105 - the prefix marking a token type, not a secret
USERS_SELF_PATH = "/apis/user.openshift.io/v1/users/~"
DEFAULT_CACHE_TTL_SECONDS = 300.0
# Only successful look-ups are cached, so entries need valid tokens; the
# bound still keeps memory flat if many users come and go within a TTL.
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


class OpenShiftUsers:
    """Authenticates OpenShift tokens against one API server. Thread-safe."""

    def __init__(
        self,
        api_url: str,
        *,
        tls: ssl.SSLContext | bool = True,
        cache_ttl_seconds: float = DEFAULT_CACHE_TTL_SECONDS,
        cache_max_entries: int = DEFAULT_CACHE_MAX_ENTRIES,
        http_timeout_seconds: float = DEFAULT_HTTP_TIMEOUT_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.users_url = api_url.rstrip("/") + USERS_SELF_PATH
        self._ttl = cache_ttl_seconds
        self._max_entries = cache_max_entries
        self._clock = clock
        self._http = httpx.Client(verify=tls, timeout=http_timeout_seconds, follow_redirects=False)
        self._lock = threading.Lock()
        # token hash -> (expires at, principal), oldest first.
        self._cache: OrderedDict[str, tuple[float, Principal]] = OrderedDict()

    def close(self) -> None:
        self._http.close()

    def authenticate(self, token: str) -> Principal:
        cache_key = token_cache_key(token)
        cached = self._cached(cache_key)
        if cached is not None:
            return cached
        # Not under the lock: one slow API call must not stall every other
        # user. Two concurrent first requests with one token both ask; the
        # answers are the same.
        principal = self._look_up(token)
        self._store(cache_key, principal)
        return principal

    def _cached(self, cache_key: str) -> Principal | None:
        with self._lock:
            entry = self._cache.get(cache_key)
            if entry is None:
                return None
            expires_at, principal = entry
            if self._clock() >= expires_at:
                del self._cache[cache_key]
                return None
            return principal

    def _store(self, cache_key: str, principal: Principal) -> None:
        with self._lock:
            now = self._clock()
            self._cache.pop(cache_key, None)
            if len(self._cache) >= self._max_entries:
                for stale in [key for key, (expires, _) in self._cache.items() if expires <= now]:
                    del self._cache[stale]
            while len(self._cache) >= self._max_entries:
                self._cache.popitem(last=False)
            self._cache[cache_key] = (now + self._ttl, principal)

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
