"""Authentication: from the `Authorization` header value to a `Principal` (DDR-24).

Only `Authorization: Bearer <token>` counts. The HTTP layer hands over that
one header value and nothing else, so `X-Forwarded-User` and friends, which
any caller can set on paths the OAuth proxy does not guard, cannot sneak in.

- `sha256~...` is an opaque OpenShift token, checked through `users/~`.
- Anything else must be a JWT from an issuer named by a rule. Its unverified
  `iss` only selects which issuer's keys to verify with; the verification
  then checks `iss` again, exactly.
- No header at all is anonymous (401), unless the development-only local
  user is configured.

`offline=True` proves a caller only from what is already known (OpenShift
tokens found valid within a day, signing keys already fetched: each checked
again when its cache entry expires) and refuses whatever else would need an
outbound call.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable
from types import MappingProxyType
from typing import Any

import jwt
from jwt.exceptions import PyJWTError

from workqueue.auth.claims import claim_strings
from workqueue.auth.config import K8S_ISSUER, AuthorizationConfig
from workqueue.auth.errors import AuthenticationError, IssuerUnavailableError
from workqueue.auth.kubernetes import ClusterEnvironment
from workqueue.auth.oidc import (
    DEFAULT_HTTP_TIMEOUT_SECONDS,
    DEFAULT_KEYS_MAX_AGE_SECONDS,
    DEFAULT_LEEWAY_SECONDS,
    DEFAULT_MIN_REFRESH_SECONDS,
    OIDCIssuer,
)
from workqueue.auth.openshift import (
    DEFAULT_CACHE_TTL_SECONDS,
    OPENSHIFT_TOKEN_PREFIX,
    OpenShiftUsers,
)
from workqueue.auth.principal import Principal

logger = logging.getLogger(__name__)

# RFC 6750 §2.1: `Bearer` (case-insensitive, RFC 7235 §2.1), spaces, one b64token.
_BEARER = re.compile(r"Bearer +([A-Za-z0-9\-._~+/]+=*)", re.IGNORECASE)
# Real tokens are a few kilobytes; bigger ones are refused before any parsing.
MAX_TOKEN_LENGTH = 16 * 1024


def bearer_token(authorization_header: str) -> str:
    """The token of a `Bearer` header value, or AuthenticationError."""
    # Bounds the work on absurd headers before the regular expression runs.
    if len(authorization_header) > 2 * MAX_TOKEN_LENGTH:
        raise AuthenticationError("bearer token too long")
    match = _BEARER.fullmatch(authorization_header.strip(" \t"))
    if match is None:
        raise AuthenticationError("expected an `Authorization: Bearer <token>` header")
    token = match.group(1)
    if len(token) > MAX_TOKEN_LENGTH:
        raise AuthenticationError("bearer token too long")
    return token


class Authenticator:
    """Turns `Authorization` header values into principals. Thread-safe; build once.

    `cluster` locates the in-cluster API server and credentials (for
    `issuer: k8s` and, by default, OpenShift tokens). `openshift_api_url`
    overrides where OpenShift tokens are checked; without it they are
    checked in-cluster, and refused outside a cluster.
    """

    def __init__(
        self,
        config: AuthorizationConfig,
        *,
        local_user: str | None = None,
        cluster: ClusterEnvironment | None = None,
        openshift_api_url: str | None = None,
        http_timeout_seconds: float = DEFAULT_HTTP_TIMEOUT_SECONDS,
        leeway_seconds: float = DEFAULT_LEEWAY_SECONDS,
        min_refresh_seconds: float = DEFAULT_MIN_REFRESH_SECONDS,
        keys_max_age_seconds: float = DEFAULT_KEYS_MAX_AGE_SECONDS,
        openshift_cache_ttl_seconds: float = DEFAULT_CACHE_TTL_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        cluster = cluster or ClusterEnvironment()
        in_cluster = cluster.is_present()
        issuer_options: dict[str, Any] = {
            "http_timeout_seconds": http_timeout_seconds,
            "leeway_seconds": leeway_seconds,
            "min_refresh_seconds": min_refresh_seconds,
            "keys_max_age_seconds": keys_max_age_seconds,
            "clock": clock,
        }
        self._local_user = local_user or None
        self._audiences = _audiences_by_issuer(config)
        self._url_issuers = {
            issuer: OIDCIssuer.for_url(issuer, **issuer_options)
            for issuer in sorted(config.issuers - {K8S_ISSUER})
        }
        self._cluster_issuer: OIDCIssuer | None = None
        if K8S_ISSUER in config.issuers:
            if in_cluster:
                self._cluster_issuer = cluster.oidc_issuer(**issuer_options)
            else:
                # DDR-26: a production config must also start on a laptop.
                logger.info(
                    "authorization rules with `issuer: %s` are skipped: not running in a "
                    "cluster (no %s)",
                    K8S_ISSUER,
                    cluster.ca_path,
                )
        self._openshift: OpenShiftUsers | None = None
        if openshift_api_url is not None:
            self._openshift = OpenShiftUsers(
                openshift_api_url, cache_ttl_seconds=openshift_cache_ttl_seconds, clock=clock
            )
            if openshift_api_url.startswith("http://"):
                logger.warning(
                    "OpenShift API %s uses http: user tokens travel unencrypted (development only)",
                    openshift_api_url,
                )
        elif in_cluster:
            self._openshift = OpenShiftUsers(
                cluster.api_url,
                tls=cluster.tls_context(),
                cache_ttl_seconds=openshift_cache_ttl_seconds,
                clock=clock,
            )
        for issuer in sorted(config.insecure_issuers):
            logger.warning(
                "issuer %s uses http: its signing keys travel unprotected (development only)",
                issuer,
            )
        if self._local_user is not None:
            logger.warning(
                "WORKQUEUE_SERVICE_LOCAL_AUTH_USER is set: every request WITHOUT an "
                "Authorization header is accepted as %r with ALL permissions on ALL item "
                "types. This is for local development only; never set it in a deployment.",
                self._local_user,
            )

    def close(self) -> None:
        """Release the HTTP connections to issuers and the OpenShift API."""
        for issuer in self._url_issuers.values():
            issuer.close()
        if self._cluster_issuer is not None:
            self._cluster_issuer.close()
        if self._openshift is not None:
            self._openshift.close()

    def authenticate(self, authorization_header: str | None, *, offline: bool = False) -> Principal:
        """The caller behind an `Authorization` header value (None: header absent)."""
        if authorization_header is None:
            if self._local_user is not None:
                return Principal(identity=self._local_user, kind="local")
            raise AuthenticationError("missing bearer token")
        token = bearer_token(authorization_header)
        if token.startswith(OPENSHIFT_TOKEN_PREFIX):
            if self._openshift is None:
                raise AuthenticationError("OpenShift tokens cannot be checked here")
            return self._openshift.authenticate(token, offline=offline)
        return self._authenticate_jwt(token, offline=offline)

    def _authenticate_jwt(self, token: str, *, offline: bool) -> Principal:
        try:
            unverified = jwt.decode(token, options={"verify_signature": False})
        except PyJWTError:
            raise AuthenticationError("malformed token") from None
        issuer = unverified.get("iss")
        if not isinstance(issuer, str) or not issuer:
            raise AuthenticationError("token has no issuer")
        names: set[str] = set()
        verifier = self._url_issuers.get(issuer)
        if verifier is not None:
            names.add(issuer)
        if self._cluster_issuer is not None:
            try:
                if self._cluster_issuer.identifier(offline=offline) == issuer:
                    names.add(K8S_ISSUER)
                    # Preferred even when the URL is configured as well: the
                    # public issuer URL may be unreachable from pods (DDR-11).
                    verifier = self._cluster_issuer
            except IssuerUnavailableError:
                # Only fatal when the cluster was this token's last chance.
                if verifier is None:
                    raise
        if verifier is None:
            raise AuthenticationError("token issuer not trusted")
        accepted: frozenset[str] = frozenset().union(*(self._audiences[name] for name in names))
        claims = verifier.verify(token, accepted, offline=offline)
        return Principal(
            identity=claims["sub"],
            kind="jwt",
            issuer=issuer,
            claims=MappingProxyType(claims),
            configured_issuers=frozenset(names),
        )


def _audiences_by_issuer(config: AuthorizationConfig) -> dict[str, frozenset[str]]:
    """Per configured issuer, every `aud` its rules accept (compared exactly)."""
    audiences: dict[str, frozenset[str]] = {}
    for rule in config.rules:
        if rule.issuer is not None and rule.claims is not None:
            accepted = claim_strings(rule.claims.get("aud"))
            audiences[rule.issuer] = audiences.get(rule.issuer, frozenset()) | accepted
    return audiences
