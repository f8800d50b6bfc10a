"""One trusted OIDC issuer: discovery, its signing keys, and verification of its JWTs.

Keys are fetched lazily, on the first token from the issuer (seed 003,
"Adding a new issuer"), then cached. A token signed with a key id the cache
does not know triggers one refresh: that is how key rotation is picked up.
Refreshes are rate-limited per issuer because anyone can send a token with
a made-up `kid`; without the limit every such request would become a
request to the issuer. The key set is also refreshed when older than
`keys_max_age_seconds`, so a key the issuer withdrew stops being trusted.
`offline=True` verifies with keys already held, and calls the issuer only to
refresh a held key that aged out (within the same refresh limit).
"""

from __future__ import annotations

import json
import logging
import ssl
import threading
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx
import jwt
from jwt.exceptions import (
    ExpiredSignatureError,
    ImmatureSignatureError,
    InvalidIssuerError,
    InvalidKeyError,
    InvalidSignatureError,
    MissingRequiredClaimError,
    PyJWTError,
)

from workqueue.auth.claims import claim_strings
from workqueue.auth.errors import AuthenticationError, IssuerUnavailableError
from workqueue.auth.jwks import ASYMMETRIC_ALGORITHMS, VerificationKey, parse_key_set

logger = logging.getLogger(__name__)

DISCOVERY_PATH = "/.well-known/openid-configuration"
DEFAULT_LEEWAY_SECONDS = 30.0
DEFAULT_MIN_REFRESH_SECONDS = 30.0
DEFAULT_KEYS_MAX_AGE_SECONDS = 3600.0
DEFAULT_HTTP_TIMEOUT_SECONDS = 5.0
# Discovery documents and key sets are a few kilobytes; the cap keeps a
# misbehaving endpoint from filling memory.
MAX_DOCUMENT_BYTES = 1024 * 1024
REQUIRED_CLAIMS = ("exp", "iss", "aud", "sub")
_OFFLINE_REFUSAL = "token not checked: too many failed authentications"

# Fixed, token-free reasons for PyJWT's exceptions (most specific first).
_REASONS: tuple[tuple[type[PyJWTError], str], ...] = (
    (ExpiredSignatureError, "token expired"),
    (ImmatureSignatureError, "token not yet valid"),
    (InvalidIssuerError, "token issuer mismatch"),
    (InvalidSignatureError, "invalid token signature"),
    (InvalidKeyError, "signing key rejected"),
)


def discovery_url_for(issuer: str) -> str:
    # OpenID Connect Discovery 1.0 §4: drop a trailing slash before appending.
    return issuer.rstrip("/") + DISCOVERY_PATH


class OIDCIssuer:
    """Verifies JWTs of one issuer. Thread-safe; one instance per issuer.

    `expected_issuer` is the configured issuer, which the discovery document
    must repeat exactly; None accepts the issuer discovery names (the
    cluster's, DDR-11). `fetch_keys_from_discovery_host` fetches the key set
    from the discovery host whatever host `jwks_uri` names, and
    `bearer_token` supplies a credential for both requests: both are for
    the in-cluster API server (`kubernetes.py`).
    """

    def __init__(
        self,
        discovery_url: str,
        *,
        expected_issuer: str | None,
        fetch_keys_from_discovery_host: bool = False,
        bearer_token: Callable[[], str] | None = None,
        tls: ssl.SSLContext | bool = True,
        http_timeout_seconds: float = DEFAULT_HTTP_TIMEOUT_SECONDS,
        leeway_seconds: float = DEFAULT_LEEWAY_SECONDS,
        min_refresh_seconds: float = DEFAULT_MIN_REFRESH_SECONDS,
        keys_max_age_seconds: float = DEFAULT_KEYS_MAX_AGE_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.discovery_url = discovery_url
        self._expected_issuer = expected_issuer
        self._fetch_keys_from_discovery_host = fetch_keys_from_discovery_host
        self._bearer_token = bearer_token
        self._leeway = leeway_seconds
        self._min_refresh = min_refresh_seconds
        self._keys_max_age = keys_max_age_seconds
        self._clock = clock
        # Redirects are not followed: discovery and keys come from where
        # they were configured, never from wherever a response points.
        self._http = httpx.Client(verify=tls, timeout=http_timeout_seconds, follow_redirects=False)
        self._lock = threading.Lock()
        # Written only under the lock; the fast path reads them without it
        # (each is replaced by a single assignment, never mutated).
        self._issuer: str | None = None
        self._jwks_uri: str | None = None
        self._keys: dict[str, VerificationKey] = {}
        self._keys_fetched_at: float | None = None
        self._last_attempt_at: float | None = None

    @classmethod
    def for_url(cls, issuer: str, **options: Any) -> OIDCIssuer:
        """An issuer configured by URL: discovery under it, issuer checked exactly."""
        return cls(discovery_url_for(issuer), expected_issuer=issuer, **options)

    def close(self) -> None:
        self._http.close()

    @property
    def name(self) -> str:
        """The issuer for logs: known one, else the discovery URL."""
        return self._issuer or self._expected_issuer or self.discovery_url

    def identifier(self, *, offline: bool = False) -> str:
        """The issuer identifier (`iss`), running discovery first if need be (not `offline`)."""
        if self._issuer is not None:
            return self._issuer
        if offline:
            # As if the issuer were down: another issuer may still verify the token.
            raise IssuerUnavailableError(_OFFLINE_REFUSAL)
        with self._lock:
            if self._issuer is not None:
                return self._issuer
            if not self._may_fetch():
                raise IssuerUnavailableError("token issuer unavailable")
            try:
                issuer, _ = self._discover()
            except IssuerUnavailableError:
                # Only failures count against the refresh budget: the key
                # set fetch that follows a successful discovery must run.
                self._last_attempt_at = self._clock()
                raise
            return issuer

    def verify(
        self, token: str, accepted_audiences: frozenset[str], *, offline: bool = False
    ) -> dict[str, Any]:
        """The verified claims of `token`, or AuthenticationError (`offline`: also when
        its key is not held, for that needs the issuer; a held key that aged out is
        refreshed as online).

        `accepted_audiences` (exact strings) are the audiences this service
        answers to for this issuer: a token whose `aud` names none of them
        was minted for another service (RFC 7519 §4.1.3).
        """
        try:
            header = jwt.get_unverified_header(token)
        except PyJWTError:
            raise AuthenticationError("malformed token") from None
        algorithm = header.get("alg")
        key_id = header.get("kid")
        if not isinstance(algorithm, str) or algorithm not in ASYMMETRIC_ALGORITHMS:
            raise AuthenticationError("token signing algorithm not allowed")
        if not isinstance(key_id, str) or not key_id:
            raise AuthenticationError("token has no key id")
        key = self._held_key(key_id) if offline else self._key(key_id)
        if algorithm not in key.algorithms:
            raise AuthenticationError("token signing algorithm does not match its key")
        claims = self._decode(token, key, algorithm)
        audiences = claim_strings(claims["aud"])
        if not audiences or audiences.isdisjoint(accepted_audiences):
            raise AuthenticationError("token audience not accepted")
        subject = claims["sub"]
        if not isinstance(subject, str) or not subject:
            raise AuthenticationError("token has an empty subject")
        return claims

    def _decode(self, token: str, key: VerificationKey, algorithm: str) -> dict[str, Any]:
        try:
            return jwt.decode(
                token,
                key.public_key,
                algorithms=[algorithm],
                issuer=self.identifier(),
                leeway=self._leeway,
                options={
                    "require": list(REQUIRED_CLAIMS),
                    # The audience is checked by `verify` with the same
                    # case-insensitive comparison authorization uses.
                    "verify_aud": False,
                    # Refuse short RSA keys instead of warning about them.
                    "enforce_minimum_key_length": True,
                },
            )
        except MissingRequiredClaimError as error:
            claim = error.claim if error.claim in REQUIRED_CLAIMS else "a required"
            raise AuthenticationError(f"token lacks the {claim} claim") from None
        except PyJWTError as error:
            for error_type, reason in _REASONS:
                if isinstance(error, error_type):
                    raise AuthenticationError(reason) from None
            raise AuthenticationError("invalid token") from None

    def _key(self, key_id: str) -> VerificationKey:
        key = self._keys.get(key_id)
        if key is not None and not self._keys_are_stale():
            return key
        with self._lock:
            # Another thread may have refreshed while this one waited.
            key = self._keys.get(key_id)
            if key is not None and not self._keys_are_stale():
                return key
            if self._may_fetch():
                try:
                    self._refresh()
                except IssuerUnavailableError:
                    if key is None:
                        raise
                    # Keys that merely aged out keep working while the
                    # issuer is unreachable: an outage there should not
                    # lock every caller out here.
                    logger.warning("using cached keys of issuer %s: refresh failed", self.name)
                    return key
            key = self._keys.get(key_id)
        if key is not None:
            return key
        if self._keys_fetched_at is None:
            raise IssuerUnavailableError("token issuer unavailable")
        raise AuthenticationError("token signing key unknown")

    def _held_key(self, key_id: str) -> VerificationKey:
        key = self._keys.get(key_id)
        if key is None:
            raise AuthenticationError(_OFFLINE_REFUSAL)
        if self._keys_are_stale():
            # A key held too long is checked again as online, within the refresh
            # limit: refusing it would refuse every caller of an address kept over
            # its budget once the key set has aged out, and the refreshes a known
            # `kid` can cause are bounded as those of made-up ones are.
            return self._key(key_id)
        return key

    def _keys_are_stale(self) -> bool:
        fetched_at = self._keys_fetched_at
        return fetched_at is None or self._clock() - fetched_at >= self._keys_max_age

    def _may_fetch(self) -> bool:
        last = self._last_attempt_at
        return last is None or self._clock() - last >= self._min_refresh

    def _refresh(self) -> None:
        """Fetch (discovery if still needed, then) the key set. Caller holds the lock."""
        self._last_attempt_at = self._clock()
        jwks_uri = self._jwks_uri or self._discover()[1]
        document = self._get_json(jwks_uri, "key set")
        try:
            keys = parse_key_set(document)
        except TypeError:
            logger.warning("issuer %s: %s is not a JSON Web Key Set", self.name, jwks_uri)
            raise IssuerUnavailableError("token issuer unavailable") from None
        if not keys:
            logger.warning("issuer %s publishes no usable signing key", self.name)
        self._keys = keys
        self._keys_fetched_at = self._clock()
        logger.info("loaded %d signing keys of issuer %s", len(keys), self.name)

    def _discover(self) -> tuple[str, str]:
        """Read issuer and key set URL from discovery, and keep them. Caller holds the lock."""
        document = self._get_json(self.discovery_url, "discovery document")
        issuer = document.get("issuer") if isinstance(document, dict) else None
        jwks_uri = document.get("jwks_uri") if isinstance(document, dict) else None
        if not isinstance(issuer, str) or not issuer or not isinstance(jwks_uri, str):
            logger.warning("issuer %s: discovery lacks `issuer` or `jwks_uri`", self.name)
            raise IssuerUnavailableError("token issuer unavailable")
        if self._expected_issuer is not None and issuer != self._expected_issuer:
            # OpenID Connect Discovery 1.0 §4.3: the document must name the
            # issuer it was fetched for, else it may be an impostor's.
            logger.warning(
                "issuer %s: discovery names issuer %r; refusing its keys",
                self._expected_issuer,
                issuer,
            )
            raise IssuerUnavailableError("token issuer unavailable")
        key_set_url = self._key_set_url(jwks_uri)
        self._jwks_uri = key_set_url
        self._issuer = issuer
        return issuer, key_set_url

    def _key_set_url(self, jwks_uri: str) -> str:
        parts = urlsplit(jwks_uri)
        discovery = urlsplit(self.discovery_url)
        if self._fetch_keys_from_discovery_host:
            # DDR-11: the published host may be an address pods cannot reach.
            return urlunsplit((discovery.scheme, discovery.netloc, parts.path, parts.query, ""))
        # Plain http is only tolerated when the issuer itself was configured
        # with http (development); otherwise keys must come over TLS.
        if parts.scheme != "https" and not (parts.scheme == "http" and discovery.scheme == "http"):
            logger.warning("issuer %s: jwks_uri %r is not https", self.name, jwks_uri)
            raise IssuerUnavailableError("token issuer unavailable")
        return jwks_uri

    def _get_json(self, url: str, what: str) -> Any:
        headers = {"Accept": "application/json"}
        if self._bearer_token is not None:
            try:
                headers["Authorization"] = f"Bearer {self._bearer_token()}"
            except OSError as error:
                logger.warning("issuer %s: cannot read the credential: %s", self.name, error)
                raise IssuerUnavailableError("token issuer unavailable") from None
        try:
            with self._http.stream("GET", url, headers=headers) as response:
                if response.status_code != 200:
                    logger.warning(
                        "issuer %s: %s at %s answered HTTP %d",
                        self.name,
                        what,
                        url,
                        response.status_code,
                    )
                    raise IssuerUnavailableError("token issuer unavailable")
                body = bytearray()
                for chunk in response.iter_bytes():
                    body += chunk
                    if len(body) > MAX_DOCUMENT_BYTES:
                        logger.warning("issuer %s: %s at %s is too large", self.name, what, url)
                        raise IssuerUnavailableError("token issuer unavailable")
        except httpx.HTTPError as error:
            logger.warning("issuer %s: cannot fetch %s from %s: %s", self.name, what, url, error)
            raise IssuerUnavailableError("token issuer unavailable") from None
        try:
            return json.loads(body)
        except ValueError:
            logger.warning("issuer %s: %s at %s is not JSON", self.name, what, url)
            raise IssuerUnavailableError("token issuer unavailable") from None
