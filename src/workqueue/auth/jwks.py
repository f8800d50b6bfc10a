"""Turning an issuer's JSON Web Key Set into verification keys, and which algorithm fits which key.

Only asymmetric signature keys are kept: a symmetric (`oct`) key in a
published key set would let anyone who reads the set forge tokens, and the
`none` algorithm is never associated with any key. Each key carries the
algorithms it may verify, so a token cannot pick an algorithm of another
family for it (the classic "HS256 with the RSA public key as secret" attack).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ec import EllipticCurvePublicKey
from cryptography.hazmat.primitives.asymmetric.ed448 import Ed448PublicKey
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from cryptography.hazmat.primitives.asymmetric.rsa import RSAPublicKey
from jwt import PyJWK
from jwt.exceptions import PyJWTError

logger = logging.getLogger(__name__)

PublicKey = RSAPublicKey | EllipticCurvePublicKey | Ed25519PublicKey | Ed448PublicKey

RSA_ALGORITHMS = frozenset({"RS256", "RS384", "RS512", "PS256", "PS384", "PS512"})
# RFC 7518 §3.4: each ECDSA algorithm is defined for exactly one curve.
EC_ALGORITHM_BY_CURVE = {"P-256": "ES256", "P-384": "ES384", "P-521": "ES512"}
EDDSA_CURVES = frozenset({"Ed25519", "Ed448"})
ASYMMETRIC_ALGORITHMS = RSA_ALGORITHMS | frozenset(EC_ALGORITHM_BY_CURVE.values()) | {"EdDSA"}


@dataclass(frozen=True)
class VerificationKey:
    """One public key of an issuer and the JWS algorithms it may verify."""

    key_id: str
    public_key: PublicKey
    algorithms: frozenset[str]


def algorithms_for(jwk: Mapping[str, Any]) -> frozenset[str]:
    """The algorithms the key type admits; empty for symmetric or unknown keys."""
    key_type = jwk.get("kty")
    if key_type == "RSA":
        return RSA_ALGORITHMS
    if key_type == "EC":
        algorithm = EC_ALGORITHM_BY_CURVE.get(str(jwk.get("crv")))
        return frozenset({algorithm}) if algorithm else frozenset()
    if key_type == "OKP" and jwk.get("crv") in EDDSA_CURVES:
        return frozenset({"EdDSA"})
    return frozenset()


def _usable_for_signatures(jwk: Mapping[str, Any]) -> bool:
    use = jwk.get("use")
    operations = jwk.get("key_ops")
    if use is not None and use != "sig":
        return False
    return not (isinstance(operations, list) and "verify" not in operations)


def _verification_key(jwk: Mapping[str, Any]) -> VerificationKey | None:
    """The key, or None (with the reason logged) when it cannot verify tokens."""
    key_id = jwk.get("kid")
    if not isinstance(key_id, str) or not key_id:
        logger.info("skipping a published key without `kid`")
        return None
    allowed = algorithms_for(jwk)
    declared = jwk.get("alg")
    if declared is not None:
        # A key that names its algorithm is bound to that one only (RFC 7517 §4.4).
        allowed = allowed & {declared} if isinstance(declared, str) else frozenset()
    if not allowed or not _usable_for_signatures(jwk):
        logger.info("skipping published key %r: not an asymmetric signature key", key_id)
        return None
    if "d" in jwk:
        # Private material in a public key set means the issuer is broken;
        # trusting any of it would be unwise.
        logger.warning("skipping published key %r: it contains private key material", key_id)
        return None
    try:
        loaded = PyJWK(dict(jwk), algorithm=min(allowed)).key
    except (PyJWTError, ValueError, TypeError):
        logger.warning("skipping published key %r: it cannot be loaded", key_id)
        return None
    if not isinstance(loaded, PublicKey):
        logger.warning("skipping published key %r: not a public key", key_id)
        return None
    return VerificationKey(key_id=key_id, public_key=loaded, algorithms=allowed)


def parse_key_set(document: Any) -> dict[str, VerificationKey]:
    """Usable keys of a JWKS document by `kid`.

    Raises TypeError when the document is not a key set at all. Keys whose
    `kid` appears more than once are dropped: which one a token means would
    be ambiguous.
    """
    if not isinstance(document, dict) or not isinstance(document.get("keys"), list):
        raise TypeError("not a JSON Web Key Set")
    keys: dict[str, VerificationKey] = {}
    ambiguous: set[str] = set()
    for entry in document["keys"]:
        if not isinstance(entry, dict):
            continue
        key = _verification_key(entry)
        if key is None:
            continue
        if key.key_id in keys:
            ambiguous.add(key.key_id)
        keys[key.key_id] = key
    for key_id in ambiguous:
        logger.warning("skipping published key %r: its kid is not unique", key_id)
        del keys[key_id]
    return keys
